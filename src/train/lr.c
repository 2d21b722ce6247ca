/* lr.c — learning-rate schedules as pure functions of the step; the formulas, and the reference
 * implementations they follow, are documented in include/attn_train.h. Everything is computed in
 * double in the same order as the Python references (nanoGPT get_lr, Hugging Face's LambdaLR
 * factor, The Annotated Transformer's rate), so they agree to a few double ulps. */
#include "train-impl.h"

#include <math.h>

double attn_lr_constant(int64_t step, double lr) {
    return step < 0 ? NAN : lr;
}

double attn_lr_noam(int64_t step, double factor, int64_t d_model, int64_t warmup) {
    if (step < 0 || d_model <= 0 || warmup <= 0) return NAN;
    double s = step < 1 ? 1.0 : (double)step; /* step 0 would divide by zero: treat as 1 */
    return factor * (pow((double)d_model, -0.5) * fmin(pow(s, -0.5), s * pow((double)warmup, -1.5)));
}

double attn_lr_inv_sqrt(int64_t step, double peak, int64_t warmup) {
    if (step < 0 || warmup <= 0) return NAN;
    double s = step < 1 ? 1.0 : (double)step, w = (double)warmup;
    return peak * fmin(s / w, sqrt(w / s));
}

double attn_lr_cosine(int64_t step, double lr, double min_lr, int64_t warmup, int64_t decay_steps) {
    if (step < 0 || warmup < 0) return NAN;
    if (step < warmup) return lr * (double)(step + 1) / (double)(warmup + 1);
    if (step > decay_steps) return min_lr;
    if (decay_steps <= warmup) return step == decay_steps && step == warmup ? lr : NAN;
    double ratio = (double)(step - warmup) / (double)(decay_steps - warmup);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return min_lr + coeff * (lr - min_lr);
}

double attn_lr_linear(int64_t step, double base_lr, int64_t warmup, int64_t total) {
    if (step < 0 || warmup < 0 || total < 0) return NAN;
    if (step < warmup) return base_lr * ((double)step / (double)(warmup > 1 ? warmup : 1));
    double den = (double)(total - warmup > 1 ? total - warmup : 1);
    return base_lr * fmax(0.0, (double)(total - step) / den);
}
