// layers/newton_schulz.h: the coefficients of the Newton-Schulz iterations Muon orthogonalises its
// update with (layers/muon.h): X = M / (norm_scale ||M||_F + eps), then at iteration k
//   A = X X^T,  X = a_k X + (b_k A + c_k A A) X,
// an odd polynomial in X's singular values that maps (0, 1] towards 1, so that X ends near U V^T
// of M = U S V^T. Two sets, by NewtonSchulzKind (train_gpt's --muon-ns):
// - the quintic (Keller Jordan's Muon): one polynomial five times, its slope at 0 as large as the
//   iterations allow; the singular values end in about [0.7, 1.2];
// - Polar Express (Amsel, Persson, Musco and Gower, 2025, arXiv 2505.16932): a polynomial of its
//   own per iteration, each the best for the interval the ones before leave, so the singular
//   values end closer to 1. The numbers are those computed for five iterations with a safety
//   factor of 2e-2 and a cushion of 2, as modded-nanogpt's train_gpt.py (polar_express_coeffs) and
//   nanochat's nanochat/optim.py run them, with the norm taken 2% large as they take it, so that
//   rounding never puts a singular value past the polynomials' interval.
// Plain C: the optimizer's settings (gpt/optimizer.h) name the sets, and CPU programs print them.
#ifndef FLASHGPT_NEWTON_SCHULZ_H
#define FLASHGPT_NEWTON_SCHULZ_H

#define NEWTON_SCHULZ_STEPS 5
// Added to the scaled norm: a zero matrix stays zero.
#define NEWTON_SCHULZ_EPS 1e-7f

typedef enum { NEWTON_SCHULZ_QUINTIC, NEWTON_SCHULZ_POLAR_EXPRESS, NUM_NEWTON_SCHULZ } NewtonSchulzKind;

typedef struct {
    float norm_scale;
    float abc[NEWTON_SCHULZ_STEPS][3];   // (a, b, c) of each iteration
} NewtonSchulzCoefficients;

// By NewtonSchulzKind.
static const NewtonSchulzCoefficients newton_schulz_coefficients[NUM_NEWTON_SCHULZ] = {
    {1.0f,
     {{3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f}}},
    {1.02f,
     {{8.156554524902461f, -22.48329292557795f, 15.878769915207462f},
      {4.042929935166739f, -2.808917465908714f, 0.5000178451051316f},
      {3.8916678022926607f, -2.772484153217685f, 0.5060648178503393f},
      {3.285753657755655f, -2.3681294933425376f, 0.46449024233003106f},
      {2.3465413258596377f, -1.7097828382687081f, 0.42323551169305323f}}},
};

// "quintic" or "polar", as --muon-ns names them.
static inline const char* newton_schulz_name(int kind) { return kind == NEWTON_SCHULZ_POLAR_EXPRESS ? "polar" : "quintic"; }

#endif
