// tests/unit/distributed/test_distributed.c: the data-parallel library on CPU: the launchers' environments,
// whether --gpus may start ranks under them, the Slurm node list, the TCP rendezvous between
// forked processes on 127.0.0.1 (delivery, stray connections, time-outs, refusals), the
// one-command launch of ranks (and a program's --gpus: its refusals, the ranks' command line),
// and ZeRO-1's shard arithmetic (flat, and by matrices for Muon), with its reduce-scatter simulated in
// memory.
// Run as "test_distributed --child MODE" it is one rank of a launch_local_ranks case.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "distributed/launcher.h"
#include "distributed/rendezvous.h"
#include "distributed/zero_shard.h"
#include "tests/lib/test.h"

extern char** environ;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Launchers

static void expect_launch(const char* name, char* const env[], const char* launcher, int rank,
                          int world_size, int local_rank, const char* addr, int port) {
    test_begin(name);
    LaunchInfo info;
    char err[ERR_LEN] = "";
    int rc = launch_info_parse(env, &info, err);
    CHECK(rc == 0, "parse failed: %s", err);
    if (rc == 0) {
        CHECK(strcmp(info.launcher, launcher) == 0, "launcher %s, expected %s", info.launcher, launcher);
        CHECK(info.rank == rank && info.world_size == world_size && info.local_rank == local_rank,
              "rank %d of %d (local %d), expected %d of %d (local %d)", info.rank,
              info.world_size, info.local_rank, rank, world_size, local_rank);
        CHECK(strcmp(info.master_addr, addr) == 0, "master '%s', expected '%s'", info.master_addr, addr);
        CHECK(info.master_port == port, "port %d, expected %d", info.master_port, port);
    }
    test_end();
}

// The parse fails and its one line names the variable.
static void expect_launch_error(const char* name, char* const env[], const char* variable) {
    test_begin(name);
    LaunchInfo info;
    char err[ERR_LEN] = "";
    CHECK(launch_info_parse(env, &info, err) != 0, "accepted");
    CHECK(strstr(err, variable) != NULL, "error '%s' does not name %s", err, variable);
    CHECK(strchr(err, '\n') == NULL, "error '%s' is more than one line", err);
    test_end();
}

static void test_launchers(void) {
    char* none[] = {"HOME=/root", "PATH=/bin", NULL};
    expect_launch("launch: no launcher is rank 0 of 1", none, "none", 0, 1, 0, "", 0);

    char* torchrun[] = {"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "MASTER_ADDR=10.1.2.3",
                        "MASTER_PORT=29400", "LOCAL_WORLD_SIZE=4", NULL};
    expect_launch("launch: torchrun", torchrun, "torchrun", 3, 8, 3, "10.1.2.3", 29400);
    // torchrun's agent holds MASTER_PORT for its own store: the rendezvous takes the next port.
    char* torchrun_agent[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=29500",
                              "TORCHELASTIC_USE_AGENT_STORE=True", NULL};
    expect_launch("launch: torchrun's agent store keeps MASTER_PORT", torchrun_agent, "torchrun", 1, 2, 1, "h", 29501);
    char* torchrun_one[] = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", NULL};
    expect_launch("launch: torchrun with one rank needs no master", torchrun_one, "torchrun", 0, 1, 0, "", 0);
    // torchrun started by srun: torchrun's variables win.
    char* torchrun_in_slurm[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                                 "RANK=5", "WORLD_SIZE=16", "LOCAL_RANK=1", "MASTER_ADDR=h",
                                 "MASTER_PORT=1234", NULL};
    expect_launch("launch: torchrun inside srun", torchrun_in_slurm, "torchrun", 5, 16, 1, "h", 1234);

    char* slurm[] = {"SLURM_PROCID=9", "SLURM_NTASKS=16", "SLURM_LOCALID=1",
                     "SLURM_JOB_NODELIST=gpu[07-14]", "SLURM_JOB_ID=4242", NULL};
    expect_launch("launch: slurm, master from the node list", slurm, "slurm", 9, 16, 1, "gpu07",
                  DEFAULT_MASTER_PORT + 242);
    char* slurm_old[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                         "SLURM_NODELIST=a,b", NULL};
    expect_launch("launch: slurm, SLURM_NODELIST and the default port", slurm_old, "slurm", 1, 2,
                  0, "a", DEFAULT_MASTER_PORT);
    char* slurm_master[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1",
                            "SLURM_JOB_NODELIST=n[1-2]", "MASTER_ADDR=login3",
                            "MASTER_PORT=4000", NULL};
    expect_launch("launch: slurm with MASTER_ADDR and MASTER_PORT", slurm_master, "slurm", 1, 2,
                  1, "login3", 4000);

    char* mpi[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                   "OMPI_COMM_WORLD_LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=5000",
                   "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", NULL};
    expect_launch("launch: mpirun (inside a Slurm job)", mpi, "mpirun", 2, 4, 0, "127.0.0.1", 5000);

    char* rank_too_big[] = {"RANK=4", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=h",
                            "MASTER_PORT=1", NULL};
    expect_launch_error("launch error: RANK not below WORLD_SIZE", rank_too_big, "RANK");
    char* not_number[] = {"RANK=1x", "WORLD_SIZE=4", "LOCAL_RANK=0", NULL};
    expect_launch_error("launch error: RANK not a number", not_number, "RANK");
    char* negative[] = {"RANK=0", "WORLD_SIZE=-2", "LOCAL_RANK=0", NULL};
    expect_launch_error("launch error: negative WORLD_SIZE", negative, "WORLD_SIZE");
    char* no_size[] = {"RANK=0", "LOCAL_RANK=0", NULL};
    expect_launch_error("launch error: RANK without WORLD_SIZE", no_size, "WORLD_SIZE");
    char* size_only[] = {"WORLD_SIZE=2", NULL};
    expect_launch_error("launch error: WORLD_SIZE without RANK", size_only, "RANK");
    char* no_local[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
    expect_launch_error("launch error: no LOCAL_RANK", no_local, "LOCAL_RANK");
    char* no_master[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_PORT=1", NULL};
    expect_launch_error("launch error: torchrun without MASTER_ADDR", no_master, "MASTER_ADDR");
    char* empty_master[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=",
                            "MASTER_PORT=1", NULL};
    expect_launch_error("launch error: empty MASTER_ADDR", empty_master, "MASTER_ADDR");
    char* bad_port[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h",
                        "MASTER_PORT=70000", NULL};
    expect_launch_error("launch error: MASTER_PORT out of range", bad_port, "MASTER_PORT");
    char* mpi_no_port[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                           "OMPI_COMM_WORLD_LOCAL_RANK=0", "MASTER_ADDR=h", NULL};
    expect_launch_error("launch error: mpirun without MASTER_PORT", mpi_no_port, "MASTER_PORT");
    char* mpi_no_addr[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                           "OMPI_COMM_WORLD_LOCAL_RANK=0", "MASTER_PORT=1", NULL};
    expect_launch_error("launch error: mpirun without MASTER_ADDR", mpi_no_addr, "MASTER_ADDR");
    char* slurm_no_nodes[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", NULL};
    expect_launch_error("launch error: slurm without a node list", slurm_no_nodes, "SLURM_JOB_NODELIST");
    char* slurm_bad_nodes[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                               "SLURM_JOB_NODELIST=node[01-04", NULL};
    expect_launch_error("launch error: slurm node list unbalanced", slurm_bad_nodes, "SLURM_JOB_NODELIST");
    char* slurm_local[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=2",
                           "SLURM_JOB_NODELIST=a", NULL};
    expect_launch_error("launch error: SLURM_LOCALID not below SLURM_NTASKS", slurm_local, "SLURM_LOCALID");
}

// launch_local_check on the environment of a launcher: whether --gpus 2 may start its ranks.
static void expect_local_launch(const char* name, char* const env[], const char* refusal) {
    test_begin(name);
    LaunchInfo info;
    char err[ERR_LEN] = "";
    if (launch_info_parse(env, &info, err) != 0) {
        test_fail("parse failed: %s", err);
    } else if (!refusal) {
        CHECK(launch_local_check(&info, 2, err) == 0, "refused: %s", err);
    } else {
        CHECK(launch_local_check(&info, 2, err) != 0, "accepted");
        CHECK(strstr(err, refusal) && strstr(err, "leave --gpus out"), "'%s' does not say '%s'",
              err, refusal);
        CHECK(strchr(err, '\n') == NULL, "error '%s' is more than one line", err);
    }
    test_end();
}

static void test_local_launch_check(void) {
    char* none[] = {"HOME=/root", NULL};
    expect_local_launch("--gpus: without a launcher", none, NULL);
    // A batch script or srun -n 1 is one task: the ranks --gpus starts are the whole run.
    char* slurm_one[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "SLURM_JOB_ID=7", NULL};
    expect_local_launch("--gpus: inside a Slurm step of one task", slurm_one, NULL);
    char* torchrun_one[] = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", NULL};
    expect_local_launch("--gpus: under torchrun of one rank", torchrun_one, NULL);
    char* torchrun[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
    expect_local_launch("--gpus refused under torchrun of 2 ranks", torchrun,
                        "torchrun already started 2 (this is rank 1)");
    char* slurm[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=n1", NULL};
    expect_local_launch("--gpus refused under srun of 4 tasks", slurm, "srun --ntasks-per-node 2");
    char* mpi[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                   "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
    expect_local_launch("--gpus refused under mpirun of 2 ranks", mpi, "mpirun -N 2");
}

static void test_nodelists(void) {
    static const char* cases[][2] = {
        {"node[01-04,07]", "node01"}, {"a,b", "a"}, {"gpu-3", "gpu-3"},
        {"node[07,01-04]", "node07"}, {"x[5]", "x5"}, {"rack[1-2]-n[05-06],login", "rack1-n05"},
        {"gpu[3-4],cpu[1-9]", "gpu3"}, {"h-[10-12].ib", "h-10.ib"},
    };
    test_begin("slurm node list: first host");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char host[64], err[ERR_LEN] = "";
        int rc = slurm_first_node(cases[i][0], host, sizeof(host), err);
        CHECK(rc == 0 && strcmp(host, cases[i][1]) == 0, "'%s' gave '%s' (%s), expected '%s'",
              cases[i][0], rc == 0 ? host : "", err, cases[i][1]);
    }
    test_end();

    static const char* bad[] = {"", "node[01-04", "node]1[", ",a", "[]"};
    test_begin("slurm node list: malformed ones refused");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char host[64], err[ERR_LEN] = "";
        CHECK(slurm_first_node(bad[i], host, sizeof(host), err) != 0, "'%s' gave '%s'", bad[i], host);
    }
    char host[4], err[ERR_LEN] = "";
    CHECK(slurm_first_node("longname", host, sizeof(host), err) != 0, "a host past the buffer accepted");
    test_end();
}

// ---------------------------------------------------------------------------------------------
// Rendezvous: each rank a forked process; the results come back through shared memory.

#define BLOB_LEN 128        // the size of an NCCL unique id
#define MAX_RANKS 8
#define CHILD_LIMIT_S 30    // no child outlives this, whatever goes wrong

typedef struct {
    int rank, world_size;
    double delay_s;         // before it starts
} RankPlan;

typedef struct {
    int done;
    int rc;
    int blob_ok;            // the blob is rank 0's
    double seconds;         // in rendezvous()
    char err[ERR_LEN];
} RankResult;

static unsigned char blob_byte(int i) { return (unsigned char)(i * 37 + 11); }

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

// Not a rank: a connection to rank 0 that sends the first bytes of a hello, then nothing, and is
// held until rank 0 closes it. 0 once rank 0 has closed it, -1 when it never got one.
static int hold_stray(int port, int bytes) {
    static const char hello[16] = "FGRV\0\0\0\1\0\0\0\2\0\0\0\200";   // rank 1 of 2
    struct sockaddr_in addr = loopback(port);
    for (double give_up = now_s() + 5.0; now_s() < give_up; usleep(20000)) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
            close(fd);
            continue;
        }
        char byte;
        if (send(fd, hello, (size_t)bytes, 0) != bytes || recv(fd, &byte, 1, 0) != 0) bytes = -1;
        close(fd);
        return bytes < 0 ? -1 : 0;
    }
    return -1;
}

static void run_ranks(const RankPlan* plans, int count, int port, double timeout_s,
                      RankResult* results) {
    memset(results, 0, (size_t)count * sizeof(RankResult));
    pid_t pids[MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < count; i++) {
        pids[i] = fork();
        if (pids[i] != 0) continue;
        alarm(CHILD_LIMIT_S);
        usleep((useconds_t)(plans[i].delay_s * 1e6));
        unsigned char blob[BLOB_LEN];
        for (int b = 0; b < BLOB_LEN; b++) blob[b] = plans[i].rank == 0 ? blob_byte(b) : 0;
        double start = now_s();
        RankResult* r = &results[i];
        r->rc = rendezvous("127.0.0.1", port, plans[i].rank, plans[i].world_size, blob, BLOB_LEN,
                           timeout_s, r->err);
        r->seconds = now_s() - start;
        r->blob_ok = 1;
        for (int b = 0; b < BLOB_LEN; b++) r->blob_ok &= blob[b] == blob_byte(b);
        r->done = 1;
        _exit(0);
    }
    double deadline = now_s() + CHILD_LIMIT_S + 5;
    for (int i = 0; i < count; i++) {
        if (pids[i] < 0) continue;
        while (waitpid(pids[i], NULL, WNOHANG) == 0) {
            if (now_s() > deadline) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
                break;
            }
            usleep(10000);
        }
    }
}

static RankResult* shared_results(void) {
    void* p = mmap(NULL, MAX_RANKS * sizeof(RankResult), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    return p;
}

static int free_port(void) {
    char err[ERR_LEN];
    int port = rendezvous_free_port(err);
    if (port < 0) { fprintf(stderr, "%s\n", err); exit(1); }
    return port;
}

static void test_rendezvous_delivers(RankResult* res) {
    test_begin("rendezvous: 4 ranks, rank 0 last, the id reaches all");
    RankPlan plans[] = {{2, 4, 0}, {1, 4, 0.05}, {3, 4, 0}, {0, 4, 0.4}};
    run_ranks(plans, 4, free_port(), 5.0, res);
    for (int i = 0; i < 4; i++) {
        CHECK(res[i].done && res[i].rc == 0, "rank %d: %s", plans[i].rank,
              res[i].done ? res[i].err : "did not finish");
        CHECK(res[i].blob_ok, "rank %d got another blob", plans[i].rank);
    }
    test_end();

    test_begin("rendezvous: world size 1 needs no network");
    char err[ERR_LEN] = "";
    unsigned char blob[BLOB_LEN] = {0};
    CHECK(rendezvous("127.0.0.1", 1, 0, 1, blob, BLOB_LEN, 1.0, err) == 0, "%s", err);
    test_end();
}

static void test_rendezvous_strays(RankResult* res) {
    test_begin("rendezvous: connections that say nothing or half a hello delay no rank");
    int port = free_port();
    static const int stray_bytes[] = {0, 8};
    pid_t strays[2];
    fflush(stdout);
    for (int i = 0; i < 2; i++) {
        strays[i] = fork();
        if (strays[i] != 0) continue;
        alarm(CHILD_LIMIT_S);
        _exit(hold_stray(port, stray_bytes[i]) == 0 ? 0 : 1);
    }
    // Rank 1 comes after the strays have connected.
    RankPlan plans[] = {{0, 2, 0}, {1, 2, 0.5}};
    double timeout = 5.0;
    run_ranks(plans, 2, port, timeout, res);
    for (int i = 0; i < 2; i++) {
        CHECK(res[i].done && res[i].rc == 0, "rank %d: %s", i, res[i].done ? res[i].err : "did not finish");
        CHECK(res[i].blob_ok, "rank %d got another blob", i);
        CHECK(res[i].seconds < 2.5, "rank %d took %.1f s (the time-out is %g s)", i, res[i].seconds, timeout);
    }
    // By now rank 0 has closed the strays' connections.
    double deadline = now_s() + 1.0;
    for (int i = 0; i < 2; i++) {
        int status = -1;
        while (strays[i] > 0 && waitpid(strays[i], &status, WNOHANG) == 0 && now_s() < deadline) usleep(10000);
        if (status == -1 && strays[i] > 0) {
            kill(strays[i], SIGKILL);
            waitpid(strays[i], NULL, 0);
        }
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the stray connection sending %d bytes %s",
              stray_bytes[i], status == -1 ? "was not closed by rank 0" : "never connected, or got an answer");
    }
    test_end();
}

static void test_rendezvous_missing(RankResult* res) {
    test_begin("rendezvous: a missing rank times out on every other rank");
    RankPlan plans[] = {{0, 3, 0}, {1, 3, 0}};   // rank 2 never comes
    double timeout = 1.5;
    run_ranks(plans, 2, free_port(), timeout, res);
    for (int i = 0; i < 2; i++) {
        CHECK(res[i].done && res[i].rc != 0, "rank %d: did not fail (%s)", plans[i].rank,
              res[i].done ? "returned 0" : "did not finish");
        CHECK(strstr(res[i].err, "missing rank 2)") != NULL, "rank %d: '%s' does not name rank 2",
              plans[i].rank, res[i].err);
        CHECK(res[i].seconds < timeout + 1.5, "rank %d took %.1f s", plans[i].rank, res[i].seconds);
    }
    test_end();

    test_begin("rendezvous: no rank 0 times out");
    RankPlan alone[] = {{1, 2, 0}};
    run_ranks(alone, 1, free_port(), 1.0, res);
    CHECK(res[0].done && res[0].rc != 0 && strstr(res[0].err, "no rank 0"), "'%s'", res[0].err);
    CHECK(res[0].seconds < 2.5, "took %.1f s", res[0].seconds);
    test_end();
}

static void test_rendezvous_refusals(RankResult* res) {
    test_begin("rendezvous: a wrong world size ends every rank");
    RankPlan wrong[] = {{0, 2, 0}, {1, 3, 0}};
    run_ranks(wrong, 2, free_port(), 5.0, res);
    for (int i = 0; i < 2; i++) {
        CHECK(res[i].done && res[i].rc != 0, "rank %d did not fail", wrong[i].rank);
        CHECK(strstr(res[i].err, "world size is 3, rank 0 says 2"), "rank %d: '%s'", wrong[i].rank,
              res[i].err);
        CHECK(res[i].seconds < 3.0, "rank %d took %.1f s", wrong[i].rank, res[i].seconds);
    }
    test_end();

    test_begin("rendezvous: a duplicate rank ends every rank");
    RankPlan twice[] = {{0, 3, 0}, {1, 3, 0}, {1, 3, 0.2}};
    run_ranks(twice, 3, free_port(), 5.0, res);
    for (int i = 0; i < 3; i++) {
        CHECK(res[i].done && res[i].rc != 0, "process %d (rank %d) did not fail", i, twice[i].rank);
        CHECK(strstr(res[i].err, "rank 1 arrived twice"), "process %d: '%s'", i, res[i].err);
        CHECK(res[i].seconds < 3.0, "process %d took %.1f s", i, res[i].seconds);
    }
    test_end();

    // The second rank 0 finds the port taken: both rank 0s and the rank that arrived name it.
    test_begin("rendezvous: two rank 0s end every rank, naming rank 0");
    RankPlan two_zeros[] = {{0, 3, 0}, {1, 3, 0}, {0, 3, 0.3}};
    run_ranks(two_zeros, 3, free_port(), 5.0, res);
    for (int i = 0; i < 3; i++) {
        CHECK(res[i].done && res[i].rc != 0, "process %d (rank %d) did not fail", i, two_zeros[i].rank);
        CHECK(strstr(res[i].err, "rank 0 arrived twice"), "process %d: '%s'", i, res[i].err);
        CHECK(res[i].seconds < 3.0, "process %d took %.1f s", i, res[i].seconds);
    }
    test_end();

    // A port held by another program, which never answers: rank 0 gives up on it within its
    // time-out.
    test_begin("rendezvous: a port in use is one clear line");
    int port = free_port();
    int holder = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = loopback(port);
    if (holder < 0 || bind(holder, (struct sockaddr*)&addr, sizeof(addr)) != 0 || listen(holder, 1) != 0) {
        test_fail("cannot hold port %d", port);
    } else {
        RankPlan first[] = {{0, 2, 0}};
        run_ranks(first, 1, port, 0.5, res);
        CHECK(res[0].done && res[0].rc != 0, "rank 0 did not fail");
        CHECK(strstr(res[0].err, "in use") && strstr(res[0].err, "MASTER_PORT"), "'%s'", res[0].err);
        CHECK(res[0].seconds < 1.0, "took %.1f s", res[0].seconds);
    }
    if (holder >= 0) close(holder);
    test_end();

    test_begin("rendezvous: rank 0's reason prints as one line");
    port = free_port();
    int fake = socket(AF_INET, SOCK_STREAM, 0);
    addr = loopback(port);
    if (fake < 0 || bind(fake, (struct sockaddr*)&addr, sizeof(addr)) != 0 || listen(fake, 1) != 0) {
        test_fail("cannot listen on port %d", port);
    } else {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            // A rank 0 that refuses with a reason of several lines and a terminal escape.
            alarm(CHILD_LIMIT_S);
            static const char reason[] = "first line\nsecond line\r\x1b[2Jthird\x7f";
            char hello[16];
            uint32_t answer[3] = {htonl(0x46475256u), htonl(1), htonl(sizeof(reason) - 1)};
            int fd = accept(fake, NULL, NULL);
            if (fd >= 0 && recv(fd, hello, sizeof(hello), MSG_WAITALL) == sizeof(hello)) {
                send(fd, answer, sizeof(answer), 0);
                send(fd, reason, sizeof(reason) - 1, 0);
            }
            _exit(0);
        }
        RankPlan one[] = {{1, 2, 0}};
        run_ranks(one, 1, port, 2.0, res);
        if (pid > 0) waitpid(pid, NULL, 0);
        CHECK(res[0].done && res[0].rc != 0, "rank 1 did not fail");
        CHECK(strstr(res[0].err, "first line second line"), "'%s'", res[0].err);
        for (const char* c = res[0].err; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                test_fail("the reason keeps control character %d at %d: '%s'", *c,
                          (int)(c - res[0].err), res[0].err);
                break;
            }
    }
    if (fake >= 0) close(fake);
    test_end();
}

// ---------------------------------------------------------------------------------------------
// The one-command launch: the ranks are this program again, in a child mode.

static int child_main(const char* mode) {
    LaunchInfo info;
    char err[ERR_LEN] = "";
    if (launch_info_parse(environ, &info, err) != 0) {
        fprintf(stderr, "child: %s\n", err);
        return 2;
    }
    if (strncmp(mode, "fail-rank-", 10) == 0) {
        if (info.rank == atoi(mode + 10)) return 3;
        sleep(CHILD_LIMIT_S);   // to be stopped by the launcher
        return 0;
    }
    // The rendezvous port is the one the launcher gave, whatever the environment it was run in.
    if (strcmp(info.launcher, "torchrun") != 0 || info.local_rank != info.rank ||
        strcmp(info.master_addr, "127.0.0.1") != 0 || info.master_port != atoi(getenv("MASTER_PORT"))) {
        fprintf(stderr, "child: launcher %s, rank %d local %d, master %s:%d (MASTER_PORT %s)\n",
                info.launcher, info.rank, info.local_rank, info.master_addr, info.master_port,
                getenv("MASTER_PORT"));
        return 4;
    }
    unsigned char blob[BLOB_LEN];
    for (int b = 0; b < BLOB_LEN; b++) blob[b] = info.rank == 0 ? blob_byte(b) : 0;
    if (rendezvous(info.master_addr, info.master_port, info.rank, info.world_size, blob,
                   BLOB_LEN, 5.0, err) != 0) {
        fprintf(stderr, "child rank %d: %s\n", info.rank, err);
        return 5;
    }
    for (int b = 0; b < BLOB_LEN; b++) if (blob[b] != blob_byte(b)) return 6;
    return 0;
}

static void test_local_launch(const char* self) {
    test_begin("launch_local_ranks: 3 ranks meet through the environment they were given");
    char err[ERR_LEN] = "";
    char* argv_ok[] = {(char*)self, "--child", "rendezvous", NULL};
    CHECK(launch_local_ranks(argv_ok, 3, err) == 0, "%s", err);
    test_end();

    test_begin("launch_local_ranks: a failing rank stops the others");
    char* argv_fail[] = {(char*)self, "--child", "fail-rank-1", NULL};
    double start = now_s();
    CHECK(launch_local_ranks(argv_fail, 3, err) != 0, "returned success");
    CHECK(strstr(err, "rank 1 of 3 exited with status 3; the other ranks were stopped"), "'%s'", err);
    CHECK(now_s() - start < 10.0, "took %.1f s", now_s() - start);
    test_end();

    test_begin("launch_local_ranks: a single rank's failure names no other ranks");
    char* argv_one[] = {(char*)self, "--child", "fail-rank-0", NULL};
    CHECK(launch_local_ranks(argv_one, 1, err) != 0, "returned success");
    CHECK(strcmp(err, "rank 0 of 1 exited with status 3") == 0, "'%s'", err);
    test_end();

    // As from a Slurm batch script run under torchrun's agent: the ranks are the launcher's own.
    test_begin("launch_local_ranks: inside a one-task launcher, the ranks meet on the given port");
    char* outer[][2] = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"},
                        {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
    int outer_count = (int)(sizeof(outer) / sizeof(outer[0]));
    for (int i = 0; i < outer_count; i++) setenv(outer[i][0], outer[i][1], 1);
    CHECK(launch_local_ranks(argv_ok, 2, err) == 0, "%s", err);
    for (int i = 0; i < outer_count; i++) unsetenv(outer[i][0]);
    test_end();
}

// A program's --gpus: refused without NCCL or GPUs enough, in one line each; otherwise its ranks
// run the program's command line without the option (here --gpus 2 around this program's child
// mode, which any other command line would not reach).
static void test_launch_gpus(const char* self) {
    char err[ERR_LEN] = "";
    char* argv[] = {(char*)self, "--gpus", "2", "--child", "rendezvous", NULL};
    const unsigned char gpus_option[] = {0, 1, 1, 0, 0};
    test_begin("launch_gpus: refused without NCCL or GPUs enough");
    CHECK(launch_gpus(5, argv, gpus_option, 2, 2, 0, err) != 0 && strstr(err, "--gpus 2 needs NCCL"), "'%s'", err);
    CHECK(launch_gpus(5, argv, gpus_option, 2, 0, 1, err) != 0 && !strcmp(err, "--gpus 2: no CUDA device"), "'%s'", err);
    CHECK(launch_gpus(5, argv, gpus_option, 2, 1, 1, err) != 0 && !strcmp(err, "--gpus 2: this process sees 1 GPU"),
          "'%s'", err);
    test_end();
    test_begin("launch_gpus: the ranks run the command line without --gpus");
    CHECK(launch_gpus(5, argv, gpus_option, 2, 2, 1, err) == 0, "%s", err);
    test_end();
}

// ---------------------------------------------------------------------------------------------
// ZeRO-1 shards

// The flat shards of P parameters (one tensor).
static int flat_shard(ZeroShard* s, size_t P, int W, int r, size_t align, char* err) {
    ZeroTensor all = {P, 1};
    return zero_shard_init(s, &all, 1, W, r, 0, align, err);
}

static void test_zero_shards(void) {
    test_begin("zero shards: every parameter in exactly one shard, equal aligned chunks");
    static const size_t counts[] = {0, 1, 2, 127, 128, 129, 1000, 4097, 65536, 999983, 124475904};
    static const size_t aligns[] = {1, 128, 1000};
    char err[ERR_LEN] = "";
    int bad = 0;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (size_t ai = 0; ai < sizeof(aligns) / sizeof(aligns[0]); ai++)
            for (int W = 1; W <= 70 && bad < 5; W += (W < 17 ? 1 : 13)) {
                size_t P = counts[ci], align = aligns[ai], next = 0;
                ZeroShard first;
                for (int r = 0; r < W; r++) {
                    ZeroShard s;
                    if (flat_shard(&s, P, W, r, align, err) != 0) {
                        test_fail("P %zu W %d r %d: %s", P, W, r, err);
                        bad++;
                        break;
                    }
                    if (r == 0) first = s;
                    int ok = s.shard_size % align == 0 && s.shard_size == first.shard_size &&
                             s.padded_count == s.shard_size * (size_t)W && s.padded_count >= P &&
                             s.padded_count - P < (size_t)W * align && s.begin == next &&
                             s.end >= s.begin && s.end - s.begin <= s.shard_size && s.owned == s.end - s.begin &&
                             (s.begin == P || s.begin == (size_t)r * s.shard_size);
                    if (!ok) {
                        test_fail("P %zu align %zu W %d r %d: shard %zu padded %zu [%zu, %zu), "
                                  "expected to start at %zu", P, align, W, r, s.shard_size,
                                  s.padded_count, s.begin, s.end, next);
                        bad++;
                        break;
                    }
                    next = s.end;
                }
                if (next != P && !bad) {
                    test_fail("P %zu align %zu W %d: the shards end at %zu", P, align, W, next);
                    bad++;
                }
            }
    ZeroShard s;
    CHECK(flat_shard(&s, 10, 4, 4, 1, err) != 0, "rank 4 of 4 accepted");
    CHECK(flat_shard(&s, 10, 0, 0, 1, err) != 0, "world size 0 accepted");
    ZeroTensor no_unit = {10, 0};
    CHECK(zero_shard_init(&s, &no_unit, 1, 2, 0, 1, 1, err) != 0, "units of 0 elements accepted");
    test_end();

    test_begin("zero shards: each tensor's parts cover it once");
    static const ZeroTensor tensors[] = {{50304 * 768, 1}, {1024 * 768, 1}, {768, 1}, {768, 1}, {768 * 2304, 1},
                                         {2304, 1}, {1, 1}, {129, 1}, {5, 1}};
    int ntensors = (int)(sizeof(tensors) / sizeof(tensors[0]));
    size_t P = 0;
    for (int t = 0; t < ntensors; t++) P += tensors[t].count;
    for (int W = 1; W <= 9; W++) {
        size_t covered = 0;
        for (int r = 0; r < W; r++) {
            zero_shard_init(&s, tensors, ntensors, W, r, 0, ZERO_SHARD_ALIGN, err);
            CHECK(s.param_count == P, "W %d: %zu parameters, expected %zu", W, s.param_count, P);
            size_t in_shard = 0, begin = 0;
            for (int t = 0; t < ntensors; begin += tensors[t++].count) {
                ZeroShardPart part = zero_shard_part(&s, tensors, t, r);
                if (part.count == 0) continue;
                CHECK(part.param_index >= begin && part.param_index + part.count <= begin + tensors[t].count &&
                      part.param_index >= s.begin && part.param_index + part.count <= s.end &&
                      part.shard_offset == part.param_index - s.begin &&
                      part.shard_offset == in_shard,
                      "W %d r %d tensor %d: part at %zu (+%zu) offset %zu", W, r, t,
                      part.param_index, part.count, part.shard_offset);
                in_shard += part.count;
            }
            CHECK(in_shard == s.end - s.begin, "W %d r %d: parts hold %zu of %zu", W, r, in_shard,
                  s.end - s.begin);
            covered += in_shard;
        }
        CHECK(covered == P, "W %d: parts hold %zu of %zu", W, covered, P);
    }
    test_end();

    test_begin("zero shards: state written by N ranks resumes on M ranks");
    // As the checkpoint moves it, parameter i holding the value i: each of N ranks holds [begin,
    // end) of them and zeros past; the all-gather puts rank r's shard at r * shard_size, and its
    // first n values are the file. Each of M ranks then reads [begin, end) of it, zeros past.
    size_t n = 100003;
    static const int worlds[] = {1, 2, 3, 7, 8};
    for (size_t a = 0; a < 5; a++) {
        int N = worlds[a];
        flat_shard(&s, n, N, 0, ZERO_SHARD_ALIGN, err);
        float* file = calloc(s.padded_count, sizeof(float));
        for (int r = 0; r < N; r++) {
            flat_shard(&s, n, N, r, ZERO_SHARD_ALIGN, err);
            for (size_t i = 0; i < s.shard_size; i++)
                file[r * s.shard_size + i] = s.begin + i < s.end ? (float)(s.begin + i) : 0.0f;
        }
        for (size_t b = 0; b < 5; b++)
            for (int r = 0, M = worlds[b]; r < M; r++) {
                flat_shard(&s, n, M, r, ZERO_SHARD_ALIGN, err);
                for (size_t i = 0; i < s.shard_size; i++) {
                    float got = s.begin + i < s.end ? file[s.begin + i] : 0.0f;
                    float expected = s.begin + i < n ? (float)(s.begin + i) : 0.0f;
                    if (got != expected) {
                        test_fail("%d -> %d ranks, rank %d element %zu: %g, expected %g", N, M, r, i, got, expected);
                        break;
                    }
                }
            }
        free(file);
    }
    test_end();
}

// Muon's tensors of a GPT of L layers and C channels, vocabulary 50304, context 1024, as gpt.cu
// gives them to the shard: each layer's matrix a unit, the rest in units of the alignment.
static int muon_tensors(ZeroTensor* t, size_t L, size_t C) {
    size_t counts[16] = {50304 * C, 1024 * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                         L * C, L * C, L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C};
    size_t units[16] = {0, 0, 0, 0, 3 * C * C, 0, C * C, 0, 0, 0, 4 * C * C, 0, 4 * C * C, 0, 0, 0};
    for (int i = 0; i < 16; i++) t[i] = (ZeroTensor){counts[i], units[i] ? units[i] : ZERO_SHARD_ALIGN};
    return 16;
}

static void test_zero_shards_by_units(void) {
    test_begin("zero shards by matrices: whole units, each element in one part, aligned parts, balanced ranks");
    // d12, d2, one layer, 5 layers, and a tensor whose count is not a multiple of its unit.
    static const size_t shapes[][2] = {{12, 768}, {2, 128}, {1, 64}, {5, 64}};
    char err[ERR_LEN] = "";
    ZeroTensor t[17];
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]) + 1; k++) {
        int n = k < 4 ? muon_tensors(t, shapes[k][0], shapes[k][1]) : 3;
        if (k == 4) {
            t[0] = (ZeroTensor){1000, 300};
            t[1] = (ZeroTensor){7, 128};
            t[2] = (ZeroTensor){0, 5};
        }
        for (int W = 1; W <= 13; W += W < 9 ? 1 : 4) {
            size_t tensor_begin = 0;
            ZeroShard s;
            size_t offsets[64] = {0}, owned[64] = {0}, sizes[64] = {0};
            for (int r = 0; r < W; r++) {
                zero_shard_init(&s, t, n, W, r, 1, ZERO_SHARD_ALIGN, err);
                sizes[r] = s.shard_size;
                owned[r] = s.owned;
            }
            for (int i = 0; i < n; tensor_begin += t[i++].count) {
                size_t next = tensor_begin, units = (t[i].count + t[i].unit - 1) / t[i].unit, least = units, most = 0;
                for (int r = 0; r < W; r++) {
                    zero_shard_init(&s, t, n, W, r, 1, ZERO_SHARD_ALIGN, err);
                    ZeroShardPart part = zero_shard_part(&s, t, i, r);
                    size_t mine = (part.count + t[i].unit - 1) / t[i].unit;
                    least = mine < least ? mine : least;
                    most = mine > most ? mine : most;
                    if (part.count == 0) continue;
                    int whole = (part.param_index - tensor_begin) % t[i].unit == 0 &&
                                (part.count % t[i].unit == 0 || part.param_index + part.count == tensor_begin + t[i].count);
                    CHECK(part.param_index == next && whole && part.shard_offset % ZERO_SHARD_ALIGN == 0 &&
                          part.shard_offset >= offsets[r] && part.shard_offset + part.count <= s.shard_size,
                          "case %zu W %d r %d tensor %d: part at %zu (+%zu) offset %zu, expected from %zu, offset >= %zu",
                          k, W, r, i, part.param_index, part.count, part.shard_offset, next, offsets[r]);
                    next = part.param_index + part.count;
                    offsets[r] = part.shard_offset + part.count;
                    owned[r] -= part.count;
                }
                CHECK(next == tensor_begin + t[i].count || t[i].count == 0, "case %zu W %d tensor %d: the parts end at %zu of %zu",
                      k, W, i, next - tensor_begin, t[i].count);
                CHECK(most - least <= 1, "case %zu W %d tensor %d: %zu to %zu units a rank", k, W, i, least, most);
            }
            for (int r = 0; r < W; r++) {
                zero_shard_init(&s, t, n, W, r, 1, ZERO_SHARD_ALIGN, err);
                CHECK(owned[r] == 0 && s.padded_count == s.param_count && offsets[r] <= sizes[r] &&
                      sizes[r] - offsets[r] < ZERO_SHARD_ALIGN,
                      "case %zu W %d r %d: %zu owned elements in no part; shard of %zu, parts up to %zu", k, W, r,
                      owned[r], sizes[r], offsets[r]);
            }
        }
    }
    test_end();

    test_begin("zero shards by matrices: state written by N ranks resumes on M ranks, flat or by matrices");
    // The file holds parameter i's value i; N ranks by matrices gather their arrays into it part
    // by part (the broadcasts of a checkpoint), then M ranks read their parts back, by matrices
    // or flat (a resume under AdamW's ZeRO-1 reads the same file).
    int n = muon_tensors(t, 5, 64);
    ZeroShard s;
    zero_shard_init(&s, t, n, 1, 0, 1, ZERO_SHARD_ALIGN, err);
    size_t P = s.param_count;
    float* file = malloc(P * sizeof(float));
    static const int worlds[] = {1, 2, 3, 7};
    for (size_t a = 0; a < 4; a++) {
        int N = worlds[a];
        for (size_t i = 0; i < P; i++) file[i] = -1.0f;
        for (int r = 0; r < N; r++) {
            zero_shard_init(&s, t, n, N, r, 1, ZERO_SHARD_ALIGN, err);
            float* array = calloc(s.shard_size, sizeof(float));
            for (int i = 0; i < n; i++) {
                ZeroShardPart part = zero_shard_part(&s, t, i, r);
                for (size_t j = 0; j < part.count; j++) array[part.shard_offset + j] = (float)(part.param_index + j);
            }
            for (int i = 0; i < n; i++) {
                ZeroShardPart part = zero_shard_part(&s, t, i, r);
                memcpy(file + part.param_index, array + part.shard_offset, part.count * sizeof(float));
            }
            free(array);
        }
        for (size_t b = 0; b < 8; b++)
            for (int r = 0, M = worlds[b % 4]; r < M; r++) {
                zero_shard_init(&s, t, n, M, r, b < 4, ZERO_SHARD_ALIGN, err);
                int wrong = 0;
                for (int i = 0; i < n && !wrong; i++) {
                    ZeroShardPart part = zero_shard_part(&s, t, i, r);
                    for (size_t j = 0; j < part.count && !wrong; j++)
                        if (file[part.param_index + j] != (float)(part.param_index + j)) {
                            test_fail("%d -> %d ranks (%s), rank %d parameter %zu: %g", N, M, b < 4 ? "by matrices" : "flat",
                                      r, part.param_index + j, file[part.param_index + j]);
                            wrong = 1;
                        }
                }
            }
    }
    free(file);
    test_end();
}

// ZeRO-1's reduce-scatter as the model runs it, N ranks simulated in memory: each rank's gradients
// (small integers, so every sum is exact in any order) arrive in ranges, each layer's slice of a
// tensor of L layers or a whole tensor; each range's piece for rank r (zero_shard_piece) is added
// from every rank into rank r's buffer alone. Each rank must then hold the sum over the ranks on
// its share (zero_shard_part), the all-reduce's values there, and have received nothing else.
static int check_reduce_scatter(const ZeroTensor* t, int n, size_t L, int W, int by_units, const char* what) {
    ZeroShard s;
    char err[ERR_LEN] = "";
    zero_shard_init(&s, t, n, W, 0, by_units, ZERO_SHARD_ALIGN, err);
    size_t P = s.param_count, padded = s.padded_count;
    int** grads = malloc((size_t)W * sizeof(int*));
    unsigned char* received = calloc((size_t)W * padded, 1);
    for (int r = 0; r < W; r++) {
        grads[r] = calloc(padded, sizeof(int));
        for (size_t i = 0; i < P; i++) grads[r][i] = (int)((i * 7 + (size_t)r * 13) % 101);
    }
    size_t begin = 0;
    for (int i = 0; i < n; begin += t[i++].count) {
        size_t slices = t[i].count % L == 0 && t[i].count >= L ? L : 1, slice = t[i].count / slices;
        for (size_t l = 0; l < slices; l++) {
            size_t lo = begin + l * slice, hi = lo + slice;
            for (int r = 0; r < W; r++) {
                zero_shard_init(&s, t, n, W, r, by_units, ZERO_SHARD_ALIGN, err);
                ZeroShardPart piece = zero_shard_piece(&s, t, i, r, lo, hi);
                ZeroShardPart part = zero_shard_part(&s, t, i, r);
                if (piece.count && (piece.param_index < lo || piece.param_index + piece.count > hi ||
                                    piece.shard_offset != part.shard_offset + (piece.param_index - part.param_index))) {
                    test_fail("%s W %d tensor %d [%zu, %zu): rank %d's piece at %zu (+%zu) offset %zu", what, W, i, lo,
                              hi, r, piece.param_index, piece.count, piece.shard_offset);
                    return 1;
                }
                for (size_t j = piece.param_index; j < piece.param_index + piece.count; j++) {
                    if (received[(size_t)r * padded + j]++) {
                        test_fail("%s W %d: rank %d receives element %zu twice", what, W, r, j);
                        return 1;
                    }
                    for (int q = 0; q < W; q++)
                        if (q != r) grads[r][j] += grads[q][j];
                }
            }
        }
    }
    int bad = 0;
    for (int r = 0; r < W && !bad; r++) {
        zero_shard_init(&s, t, n, W, r, by_units, ZERO_SHARD_ALIGN, err);
        size_t owned = 0, got = 0;
        for (size_t j = 0; j < padded; j++) got += received[(size_t)r * padded + j];
        for (int i = 0; i < n && !bad; i++) {
            ZeroShardPart part = zero_shard_part(&s, t, i, r);
            owned += part.count;
            for (size_t j = part.param_index; j < part.param_index + part.count && !bad; j++) {
                int sum = 0;
                for (int q = 0; q < W; q++) sum += (int)((j * 7 + (size_t)q * 13) % 101);
                if (!received[(size_t)r * padded + j] || grads[r][j] != sum) {
                    test_fail("%s W %d rank %d element %zu: %d, the all-reduce's %d%s", what, W, r, j, grads[r][j], sum,
                              received[(size_t)r * padded + j] ? "" : " (never received)");
                    bad = 1;
                }
            }
        }
        if (!bad && got != owned) {
            test_fail("%s W %d rank %d: received %zu elements, its share is %zu", what, W, r, got, owned);
            bad = 1;
        }
    }
    for (int r = 0; r < W; r++) free(grads[r]);
    free(grads);
    free(received);
    return bad;
}

static void test_zero_reduce_scatter(void) {
    test_begin("zero reduce-scatter simulated in memory: each rank receives its share alone, the all-reduce's sums "
               "there, flat and by matrices, ranges of layers");
    ZeroTensor t[16];
    static const size_t shapes[][2] = {{2, 64}, {3, 32}, {5, 64}};
    for (size_t k = 0; k < 3; k++) {
        int n = muon_tensors(t, shapes[k][0], shapes[k][1]);
        for (int W = 1; W <= 5; W++)
            if (check_reduce_scatter(t, n, shapes[k][0], W, 1, "by matrices") ||
                check_reduce_scatter(t, n, shapes[k][0], W, 0, "flat"))
                break;
    }
    test_end();
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
    if (argc > 1) {
        fprintf(stderr, "test_distributed: no arguments, or --child MODE\n");
        return 2;
    }
    test_launchers();
    test_local_launch_check();
    test_nodelists();
    RankResult* results = shared_results();
    test_rendezvous_delivers(results);
    test_rendezvous_strays(results);
    test_rendezvous_missing(results);
    test_rendezvous_refusals(results);
    test_local_launch(argv[0]);
    test_launch_gpus(argv[0]);
    test_zero_shards();
    test_zero_shards_by_units();
    test_zero_reduce_scatter();
    return test_exit_code();
}
