/* os_net.h - the socket half of the platform layer (util/os.h), for k3
 * serve: the system's BSD socket declarations (POSIX headers, or Winsock 2
 * on Windows, which has the same names for socket, bind, listen, getaddrinfo,
 * getsockname, inet_ntop and the sockaddr types), and wrappers for the calls
 * that differ. Sockets are ints everywhere: Windows SOCKET values are kernel
 * handles, which are small, and INVALID_SOCKET converts to -1.
 *
 * Every wrapper returns -1 with errno set on failure (Windows: the Winsock
 * error mapped to its errno name, e.g. WSAEWOULDBLOCK to EWOULDBLOCK), so
 * callers test errno the POSIX way. Any thread may call them. */
#ifndef K3_UTIL_OS_NET_H
#define K3_UTIL_OS_NET_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#endif

/* Readies the socket library (Windows WSAStartup; nothing on POSIX). Call
 * before the first socket call; calling it again is harmless. */
int k3_sock_startup(void);
/* accept(); errno EAGAIN/EWOULDBLOCK when nothing is pending on a
 * non-blocking listener, EMFILE/ENFILE out of descriptors. */
int k3_sock_accept(int lfd, struct sockaddr *sa, socklen_t *len);
int k3_sock_close(int fd);
/* shutdown(SHUT_WR): the peer reads end of file after what was sent. */
int k3_sock_shutdown_write(int fd);
int k3_sock_set_nonblock(int fd, int on);
/* Two connected sockets (fds[0], fds[1]) for waking a thread that polls:
 * a byte sent on fds[1] makes fds[0] readable. 0, or -1 with errno where
 * the platform has none (Windows: ENOSYS; the poller then wakes on its
 * own tick). */
int k3_sock_pair(int fds[2]);
/* SO_SNDTIMEO: a blocked send gives up after seconds (microsecond steps). */
int k3_sock_set_send_timeout(int fd, double seconds);
/* send() / recv(): bytes or -1 with errno. A peer gone is an error return,
 * never a signal. dontwait: this call does not block (MSG_DONTWAIT; on
 * Windows a zero-timeout poll first, so a send larger than the socket's
 * free buffer space may still wait). */
int64_t k3_sock_send(int fd, const void *buf, size_t n, int dontwait);
int64_t k3_sock_recv(int fd, void *buf, size_t n, int dontwait);
/* poll() over n sockets (POLLIN/POLLOUT, revents as poll gives them); n 0
 * sleeps ms milliseconds. Ready entries, 0 on timeout, -1 with errno. */
int k3_sock_poll(struct pollfd *p, size_t n, int ms);

#endif
