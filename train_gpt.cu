// train_gpt.cu: the training program: its main. The trainer is the library in train/: the
// command line (train/options.h), the run resolved and checked before the GPU is taken
// (train/plan.h), the model's rows of each batch (train/batches.h), the training state of a
// checkpoint and the resume from it (train/state.h), the folder of checkpoints
// (train/checkpoint_folder.h), the run on the GPU and its loop (train/loop.h), what it reports
// (train/report.h). Everything that needs no GPU is checked before the GPU is touched, so a
// command line can be checked anywhere.
// Data parallel: one process per GPU, started by torchrun, srun or mpirun (distributed/launcher.h)
// or by --gpus N here; each rank reads its own part of every epoch, the model library averages
// the gradients (gpt/gpt.h). Rank 0 alone prints, samples and writes files.
// Context parallel (--context-parallel N): each group of N consecutive ranks shares every
// sequence, rank r of a group holding its zigzag chunks r and 2N-1-r (train/batches.h); attention
// is the ring of attention/ring.h, its moves by the group's transport
// (distributed/ring_transport.h). With one process the N ranks of the group run on its GPU
// (simulated: the same code but for the ring's moves, copies in memory, for testing).
#include "common/cuda_check.h"
#include "common/error.h"
#include "distributed/launcher.h"
#include "distributed/nccl_comm.h"
#include "train/loop.h"
#include "train/options.h"
#include "train/plan.h"

int main(int argc, char** argv) {
    TrainOptions options;
    train_options_parse(argc, argv, &options);
    if (options.gpus > 0) {
        // This program again as the ranks, --gpus left out of their command line.
        int gpus = 0;
        char err[ERR_LEN];
        if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
        if (launch_gpus(argc, argv, options.gpus_args, options.gpus, gpus, nccl_comm_available(), err) != 0)
            die("%s", err);
        return 0;
    }
    // Static: the model's attention plan points into the plan (the ring), which points at its ranks.
    static RunPlan plan;
    static Trainer trainer;
    plan_run(&plan, &options);
    trainer_start(&trainer, &plan);
    train(&trainer);
    trainer_free(&trainer);
    plan_free(&plan);
    return 0;
}
