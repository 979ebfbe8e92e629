/* vmath.h - the vision path's elementwise functions (VISION.md §5.1), in the
 * spirit of core/mathfn.h: only IEEE +, -, *, / in a fixed order, so every C
 * library gives the same bits. */
#ifndef K3_VISION_VMATH_H
#define K3_VISION_VMATH_H

/* erf(x) by its Maclaurin series in double, summed until a term no longer
 * moves the sum (|x| < 4), else ±1 (float(erf(4)) is already 1). Within
 * 1e-12 of erf over the float range. */
double k3_vis_erf(double x);
/* §5.1 step 3: 0.5·x·(1 + erf(x/√2)), in double, rounded once to float. */
float k3_vis_gelu_erf(float x);
/* §5.1 step 2: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), float, k3_tanhf. */
float k3_vis_gelu_tanh(float x);

#endif
