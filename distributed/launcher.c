// distributed/launcher.c: the launchers' environment variables read into a LaunchInfo, the
// Slurm node list's first host, and the one-command launch of the ranks of one node.
#define _GNU_SOURCE
#include "distributed/launcher.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "distributed/rendezvous.h"

// How long stopped ranks get to exit on SIGTERM before SIGKILL.
#define STOP_GRACE_S 10

static const char* env_get(char* const env[], const char* name) {
    size_t len = strlen(name);
    for (; env && *env; env++) {
        if (strncmp(*env, name, len) == 0 && (*env)[len] == '=') {
            const char* value = *env + len + 1;
            return *value ? value : NULL;
        }
    }
    return NULL;
}

// A decimal in [min, max]; -1 with err naming the variable otherwise.
static int parse_int(const char* name, const char* value, long min, long max, long* out, char* err) {
    char* end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (*value < '0' || *value > '9' || *end || errno) {
        set_err(err, "%s is '%s', not a number", name, value);
        return -1;
    }
    if (v < min || v > max) {
        set_err(err, "%s is %ld, not in [%ld, %ld]", name, v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct {
    const char* launcher;
    const char* rank;
    const char* world_size;
    const char* local_rank;
    const char* per_node;   // how it is told to start N ranks on each node
} LauncherVars;

static const LauncherVars launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun --nproc-per-node"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun -N"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "srun --ntasks-per-node"},
};

static int parse_master(char* const env[], const char* launcher, LaunchInfo* out, char* err) {
    int slurm = strcmp(launcher, "slurm") == 0;
    const char* addr = env_get(env, "MASTER_ADDR");
    if (addr) {
        if (strlen(addr) >= MASTER_ADDR_LEN) {
            set_err(err, "MASTER_ADDR is longer than %d characters", MASTER_ADDR_LEN - 1);
            return -1;
        }
        strcpy(out->master_addr, addr);
    } else if (slurm) {
        const char* name = "SLURM_JOB_NODELIST";
        const char* nodes = env_get(env, name);
        if (!nodes) nodes = env_get(env, name = "SLURM_NODELIST");
        if (!nodes) {
            set_err(err, "MASTER_ADDR is not set and neither is SLURM_JOB_NODELIST (needed with "
                    "SLURM_NTASKS %d)", out->world_size);
            return -1;
        }
        char why[ERR_LEN];
        if (slurm_first_node(nodes, out->master_addr, MASTER_ADDR_LEN, why) != 0) {
            set_err(err, "%s: %s", name, why);
            return -1;
        }
    } else {
        set_err(err, "MASTER_ADDR is not set (needed with %d ranks under %s)", out->world_size,
                launcher);
        return -1;
    }

    const char* port = env_get(env, "MASTER_PORT");
    long v;
    if (port) {
        if (parse_int("MASTER_PORT", port, 1, 65535, &v, err) != 0) return -1;
        out->master_port = (int)v;
    } else if (slurm) {
        const char* job = env_get(env, "SLURM_JOB_ID");
        out->master_port = DEFAULT_MASTER_PORT;
        if (job) {
            if (parse_int("SLURM_JOB_ID", job, 0, LONG_MAX, &v, err) != 0) return -1;
            out->master_port += (int)(v % 1000);
        }
    } else {
        set_err(err, "MASTER_PORT is not set (needed with %d ranks under %s)", out->world_size,
                launcher);
        return -1;
    }
    // torchrun's agent keeps its own store listening on MASTER_PORT when it says so: the
    // rendezvous takes the port above it.
    const char* agent_store = env_get(env, "TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && !strcmp(agent_store, "True"))
        out->master_port = out->master_port < 65535 ? out->master_port + 1 : out->master_port - 1;
    return 0;
}

int launch_info_parse(char* const env[], LaunchInfo* out, char* err) {
    memset(out, 0, sizeof(*out));
    const LauncherVars* l = NULL;
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !l; i++)
        if (env_get(env, launchers[i].rank)) l = &launchers[i];
    if (!l) {
        if (env_get(env, "WORLD_SIZE")) {
            set_err(err, "WORLD_SIZE is set but RANK is not");
            return -1;
        }
        out->launcher = "none";
        out->world_size = 1;
        return 0;
    }
    out->launcher = l->launcher;

    long rank, world_size, local_rank;
    const char* size_value = env_get(env, l->world_size);
    const char* local_value = env_get(env, l->local_rank);
    if (!size_value || !local_value) {
        set_err(err, "%s is set but %s is not", l->rank, size_value ? l->local_rank : l->world_size);
        return -1;
    }
    if (parse_int(l->rank, env_get(env, l->rank), 0, INT_MAX, &rank, err) != 0 ||
        parse_int(l->world_size, size_value, 1, INT_MAX, &world_size, err) != 0 ||
        parse_int(l->local_rank, local_value, 0, INT_MAX, &local_rank, err) != 0)
        return -1;
    if (rank >= world_size) {
        set_err(err, "%s %ld is not below %s %ld", l->rank, rank, l->world_size, world_size);
        return -1;
    }
    if (local_rank >= world_size) {
        set_err(err, "%s %ld is not below %s %ld", l->local_rank, local_rank, l->world_size,
                world_size);
        return -1;
    }
    out->rank = (int)rank;
    out->world_size = (int)world_size;
    out->local_rank = (int)local_rank;
    return world_size > 1 ? parse_master(env, l->launcher, out, err) : 0;
}

int launch_local_check(const LaunchInfo* info, int n, char* err) {
    if (info->world_size == 1) return 0;
    char how[64] = "";
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++)
        if (!strcmp(info->launcher, launchers[i].launcher))
            snprintf(how, sizeof(how), " (%s %d)", launchers[i].per_node, n);
    set_err(err, "--gpus %d starts ranks of its own, but %s already started %d (this is rank %d): leave "
            "--gpus out and have %s start one rank per GPU%s", n, info->launcher, info->world_size,
            info->rank, info->launcher, how);
    return -1;
}

int slurm_first_node(const char* nodelist, char* out, size_t out_len, char* err) {
    size_t n = 0;
    const char* p = nodelist;
    while (*p && *p != ',') {
        if (*p == ']') {
            set_err(err, "node list '%s' has a ']' without its '['", nodelist);
            return -1;
        }
        if (*p != '[') {
            if (n + 1 >= out_len) break;
            out[n++] = *p++;
            continue;
        }
        // A range set such as [01-04,07]: its first number, as written (zero padding is part
        // of the host name).
        p++;
        while (*p && *p != ',' && *p != '-' && *p != ']' && *p != '[') {
            if (n + 1 >= out_len) break;
            out[n++] = *p++;
        }
        while (*p && *p != ']' && *p != '[') p++;
        if (*p != ']') {
            set_err(err, "node list '%s' has a '[' without its ']'", nodelist);
            return -1;
        }
        p++;
    }
    if (n + 1 >= out_len && *p && *p != ',') {
        set_err(err, "node list '%s': its first host is longer than %zu characters", nodelist,
                out_len - 1);
        return -1;
    }
    out[n] = '\0';
    if (n == 0) {
        set_err(err, "node list '%s' has no first host", nodelist);
        return -1;
    }
    return 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void describe_status(int status, char* out, size_t len) {
    if (WIFEXITED(status)) snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) snprintf(out, len, "was killed by %s", strsignal(WTERMSIG(status)));
    else snprintf(out, len, "ended (wait status %d)", status);
}

static void exec_rank(char* const argv[], int rank, int n, int port, pid_t parent) {
    // A rank must not outlive this launcher: if it dies, the kernel sends SIGTERM.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    char value[32];
    snprintf(value, sizeof(value), "%d", rank);
    setenv("RANK", value, 1);
    setenv("LOCAL_RANK", value, 1);
    snprintf(value, sizeof(value), "%d", n);
    setenv("WORLD_SIZE", value, 1);
    setenv("LOCAL_WORLD_SIZE", value, 1);
    snprintf(value, sizeof(value), "%d", port);
    setenv("MASTER_PORT", value, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    execv("/proc/self/exe", argv);
    fprintf(stderr, "error: rank %d: cannot run /proc/self/exe: %s\n", rank, strerror(errno));
    _exit(127);
}

int launch_local_ranks(char* const argv[], int n, char* err) {
    if (n < 1) {
        set_err(err, "--gpus %d: need at least 1", n);
        return -1;
    }
    int port = rendezvous_free_port(err);
    if (port < 0) return -1;
    pid_t* pids = calloc((size_t)n, sizeof(pid_t));
    if (!pids) {
        set_err(err, "out of memory for %d ranks", n);
        return -1;
    }
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);

    int live = 0, failed = 0;
    double stop_deadline = 0;   // when SIGTERM was sent: the time SIGKILL follows
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) exec_rank(argv, r, n, port, parent);
        if (pid < 0) {
            set_err(err, "cannot start rank %d: %s", r, strerror(errno));
            failed = 1;
            break;
        }
        pids[r] = pid;
        live++;
    }
    if (failed) {
        for (int r = 0; r < n; r++) if (pids[r] > 0) kill(pids[r], SIGTERM);
        stop_deadline = now_s() + STOP_GRACE_S;
    }

    while (live > 0) {
        for (int r = 0; r < n; r++) {
            if (pids[r] <= 0) continue;
            int status;
            pid_t done = waitpid(pids[r], &status, WNOHANG);
            if (done == 0) continue;
            pids[r] = 0;
            live--;
            if (done < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) continue;
            if (!failed) {
                char how[128];
                describe_status(status, how, sizeof(how));
                set_err(err, "rank %d of %d %s%s", r, n, how, live > 0 ? "; the other ranks were stopped" : "");
                failed = 1;
                for (int o = 0; o < n; o++) if (pids[o] > 0) kill(pids[o], SIGTERM);
                stop_deadline = now_s() + STOP_GRACE_S;
            }
        }
        if (failed && stop_deadline > 0 && now_s() > stop_deadline) {
            for (int o = 0; o < n; o++) if (pids[o] > 0) kill(pids[o], SIGKILL);
            stop_deadline = 0;
        }
        if (live > 0) usleep(10000);
    }
    free(pids);
    return failed ? -1 : 0;
}

int launch_gpus(int argc, char* const argv[], const unsigned char* leave_out, int n, int gpus, int nccl, char* err) {
    extern char** environ;
    LaunchInfo launch;
    if (launch_info_parse(environ, &launch, err) != 0 || launch_local_check(&launch, n, err) != 0) return -1;
    if (n > 1 && !nccl) {
        set_err(err, "--gpus %d needs NCCL, and this build has none (install NCCL, or set NCCL_HOME, and rebuild)", n);
        return -1;
    }
    if (gpus == 0) {
        set_err(err, "--gpus %d: no CUDA device", n);
        return -1;
    }
    if (gpus < n) {
        set_err(err, "--gpus %d: this process sees %d GPU%s", n, gpus, gpus > 1 ? "s" : "");
        return -1;
    }
    char** args = calloc((size_t)argc + 1, sizeof(char*));
    if (!args) {
        set_err(err, "out of memory");
        return -1;
    }
    int k = 0;
    for (int i = 0; i < argc; i++)
        if (!leave_out[i]) args[k++] = argv[i];
    int rc = launch_local_ranks(args, n, err);
    free(args);
    return rc;
}
