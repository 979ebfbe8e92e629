/* mathfn.h - the elementwise functions of the model, in portable C.
 *
 * Why not libm: expf/tanhf differ in their last bit between C libraries
 * (glibc, musl, Apple, MSVC), and "the same tokens on every machine" must
 * not depend on which one a user links. These use only IEEE +, -, *, / and
 * sqrt in a fixed order (the build forbids FMA contraction), so they return
 * the same bits everywhere. Accuracy: within 2 ulp of the true value over
 * the model's ranges, checked against float64 in tests/unit/test_kernels.c. */
#ifndef K3_CORE_MATHFN_H
#define K3_CORE_MATHFN_H

float k3_expf(float x);
float k3_tanhf(float x);
float k3_sigmoidf(float x);
float k3_siluf(float x);

#endif
