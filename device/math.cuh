// device/math.cuh: device math that the attention kernels and the layers share: 2^x and tanh on
// the special-function unit.
#ifndef FLASHGPT_DEVICE_MATH_CUH
#define FLASHGPT_DEVICE_MATH_CUH

// 2^x in one instruction; 2^-inf = 0, which is how masked values vanish. Results below 2^-126
// flush to 0, which spares exp2f's rescaling around the same instruction.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// tanh(x) in one instruction, to about 2^-11 relative (PTX's tanh.approx.f32); tanh(+-inf) = +-1.
__device__ __forceinline__ float fast_tanh(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#endif
