// distributed/launcher.h: who this process is among the ranks of a run, from the environment
// its launcher set (torchrun, Slurm's srun, Open MPI's mpirun, or none), and the one-command
// form for one node that starts the ranks itself.
#ifndef FLASHGPT_LAUNCHER_H
#define FLASHGPT_LAUNCHER_H

#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

// The rendezvous port when Slurm gives none and MASTER_PORT is unset (torchrun's default);
// under Slurm it is offset by the job id so that two jobs sharing a node do not collide.
#define DEFAULT_MASTER_PORT 29500
#define MASTER_ADDR_LEN 256

typedef struct {
    const char* launcher;   // "torchrun", "slurm", "mpirun" or "none"
    int rank;               // 0 .. world_size-1
    int world_size;
    int local_rank;         // the rank on its node: the GPU it uses
    char master_addr[MASTER_ADDR_LEN];   // where rank 0 listens; "" for a single rank
    int master_port;
} LaunchInfo;

// Reads env (NAME=value strings, NULL-terminated, as environ) in this order, the first
// launcher whose rank variable is set winning (torchrun inside srun is torchrun):
//   torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (the port above it when
//             TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent listens on MASTER_PORT itself)
//   mpirun:   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK; MASTER_ADDR and MASTER_PORT required
//   slurm:    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR or else the first node of
//             SLURM_JOB_NODELIST (or SLURM_NODELIST); MASTER_PORT or else a default
//   none:     rank 0 of 1
// An empty value counts as unset. The master is needed only when world_size > 1.
// Returns 0, or -1 with err naming the variable (non-numeric, out of range, missing).
int launch_info_parse(char* const env[], LaunchInfo* out, char* err);

// The first host of a Slurm node list: "node[01-04,07],gpu-3" -> "node01", "a,b" -> "a",
// "rack[1-2]-n[5-6]" -> "rack1-n5". Returns 0, or -1 with err on an unbalanced or empty list.
int slurm_first_node(const char* nodelist, char* out, size_t out_len, char* err);

// Whether this process may start n ranks of its own (--gpus n): only when its launcher, if any,
// started it alone (a Slurm batch script, srun -n 1, torchrun --nproc-per-node 1), so that the
// ranks it starts are the whole run. Under a launcher that started several ranks each of them
// already is a rank: returns -1 with err saying to leave --gpus out and how that launcher starts
// n ranks per node. Returns 0 otherwise.
int launch_local_check(const LaunchInfo* info, int n, char* err);

// The one-command form on one node: runs n copies of this program (/proc/self/exe) with argv
// (which must no longer ask for the launch), each with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port) set, and without
// TORCHELASTIC_USE_AGENT_STORE (no torchrun agent holds that port), and waits for them.
// When one fails, the others are stopped (SIGTERM, then SIGKILL after a grace period) so that
// none waits forever for it; children also get SIGTERM if this process dies.
// Returns 0 when every rank exited with status 0, or -1 with err naming the first that did not.
int launch_local_ranks(char* const argv[], int n, char* err);

// A program's own launch of n ranks on this node (train_gpt --gpus n), in this process's
// environment: refused under a launcher that started several ranks (launch_local_check), for
// n > 1 in a build without NCCL (nccl 0), and when this process sees fewer than n GPUs (gpus: the
// CUDA devices it sees); else argv (argc elements) runs as the n ranks (launch_local_ranks)
// without the elements marked in leave_out (the option that asked for the launch). 0 when every
// rank exited with status 0, or -1 with err.
int launch_gpus(int argc, char* const argv[], const unsigned char* leave_out, int n, int gpus, int nccl, char* err);

#ifdef __cplusplus
}
#endif

#endif
