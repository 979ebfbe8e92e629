# cmake/mingw-w64.cmake - CMake toolchain for the Windows cross build with
# Debian's mingw-w64 (gcc-mingw-w64-x86-64), the CMake twin of `make windows`:
#
#   cmake -B build-win-cmake -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake
#   cmake --build build-win-cmake -j2 --target k3
#
# Static executables (libgomp, winpthreads and libgcc linked in, so k3.exe
# runs under Wine or on Windows without DLLs next to it); C99 printf from
# mingw's stdio; Winsock, psapi (memory counters) and shell32 (the UTF-8
# command line) from the system. The library's own platform code is
# src/util/os_win.c. ctest is not meant for this build: tests/windows/run.sh
# (make test-windows) runs the Windows programs under Wine.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(K3_MINGW_PREFIX x86_64-w64-mingw32 CACHE STRING "mingw-w64 tool prefix")
set(CMAKE_C_COMPILER ${K3_MINGW_PREFIX}-gcc)
set(CMAKE_RC_COMPILER ${K3_MINGW_PREFIX}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${K3_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_C_FLAGS_INIT "-D__USE_MINGW_ANSI_STDIO=1")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_C_STANDARD_LIBRARIES "-lws2_32 -lpsapi -lshell32" CACHE STRING "" FORCE)
set(CMAKE_CROSSCOMPILING_EMULATOR wine64)
