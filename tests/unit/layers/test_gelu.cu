// tests/unit/layers/test_gelu.cu: layers/gelu.h against a float64 reference of the tanh-form GELU, on
// n = 8 * 1237 bf16 inputs spread over [-8, 8] (both tails and the curved middle), in place
// and out of place, with the output poisoned (NaN) first so an unwritten element fails.
// Tolerance: the kernel computes in fp32 and rounds once to bf16, so each element is within
// one bf16 rounding of the exact value: |out - ref| <= 2^-8 |ref| (half an ulp is 2^-9; the
// fp32 tanh adds ~1e-7) plus 1e-6 absolute for results that underflow near x = -8.
#include <math.h>
#include <string.h>
#include "tests/lib/test.h"
#include "layers/gelu.h"

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void run_case(const char* name, int in_place) {
    test_begin(name);
    const size_t n = 8 * 1237;
    bf16* host_in = (bf16*)malloc(n * sizeof(bf16));
    bf16* host_out = (bf16*)malloc(n * sizeof(bf16));
    for (size_t i = 0; i < n; i++) host_in[i] = __float2bfloat16(-8.0f + 16.0f * (float)((i * 7919) % n) / n);
    bf16 *in, *out;
    cudaCheck(cudaMalloc((void**)&in, n * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&out, n * sizeof(bf16)));
    cudaCheck(cudaMemcpy(in, host_in, n * sizeof(bf16), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(out, 0xff, n * sizeof(bf16)));  // NaN
    if (in_place) {
        gelu_forward(in, in, n, 0);
        out = in;
    } else {
        gelu_forward(out, in, n, 0);
    }
    cudaCheck(cudaMemcpy(host_out, out, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = __bfloat162float(host_in[i]), ref = gelu_ref(x), y = __bfloat162float(host_out[i]);
        double err = fabs(y - ref) - ldexp(fabs(ref), -8);
        if (!(err <= 1e-6)) {
            CHECK(0, "gelu(%g) = %g, reference %g", x, y, ref);
            break;
        }
        double rel = fabs(ref) > 1e-3 ? fabs(y - ref) / fabs(ref) : 0.0;
        worst = rel > worst ? rel : worst;
    }
    printf("    worst relative error %.2e (where |gelu| > 1e-3)\n", worst);
    if (!in_place) cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(in));
    free(host_in);
    free(host_out);
    test_end();
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        test_skip("gelu forward", "no CUDA device");
        test_skip("gelu forward in place", "no CUDA device");
        return test_exit_code();
    }
    run_case("gelu forward", 0);
    run_case("gelu forward in place", 1);
    return test_exit_code();
}
