// distributed/rendezvous.c: the TCP meeting of the ranks. Each rank other than 0 sends a hello
// (magic, rank, world size, blob size, four big-endian uint32); rank 0 answers each with
// (magic, status, length) and then the blob when status is 0, or its reason for refusing.
// Rank 0 reads the hellos of all connections at once, so that one that sends nothing holds up
// none. A rank 0 that finds its port taken says hello to the holder as rank 0: a rank 0 of this
// program refuses it, naming the duplicate on every rank, and anything else means the port is
// another program's.
#define _GNU_SOURCE
#include "distributed/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELLO_MAGIC 0x46475256u    // "FGRV"
#define STATUS_OK 0u
#define STATUS_REFUSED 1u
#define RETRY_S 0.1                 // between connection attempts to a rank 0 not yet there
#define MISSING_LISTED 8            // missing ranks named in the time-out line
#define STRAY_CONNECTIONS 16        // silent connections kept besides one per rank
#define PORT_HOLDER_S 1.0           // for the holder of a taken port to answer (a rank 0 does at once)

enum { ANSWER_OK, ANSWER_REFUSED, ANSWER_NONE };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int ms_until(double deadline) {
    double left = deadline - now_s();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

static int send_all(int fd, const void* data, size_t len) {
    const char* p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

// 0 when all len bytes came before the deadline; -1 on the peer closing, an error or time-out
// (errno ETIMEDOUT for the last).
static int recv_all(int fd, void* data, size_t len, double deadline) {
    char* p = data;
    while (len > 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int ready = poll(&pfd, 1, ms_until(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) { errno = ETIMEDOUT; return -1; }
        if (ready < 0) return -1;
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) errno = ECONNRESET;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_answer(int fd, uint32_t status, const void* payload, size_t len) {
    uint32_t header[3] = {htonl(HELLO_MAGIC), htonl(status), htonl((uint32_t)len)};
    if (send_all(fd, header, sizeof(header)) != 0) return -1;
    return send_all(fd, payload, len);
}

static int is_loopback(const char* addr) {
    struct in_addr a;
    if (strcmp(addr, "localhost") == 0) return 1;
    return inet_pton(AF_INET, addr, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

// Rank 0 refuses: every connected rank gets the reason, which is also rank 0's error.
static int refuse_all(int* fds, int count, const char* reason, char* err) {
    for (int i = 0; i < count; i++) {
        if (fds[i] < 0) continue;
        send_answer(fds[i], STATUS_REFUSED, reason, strlen(reason));
        close(fds[i]);
        fds[i] = -1;
    }
    set_err(err, "%s", reason);
    return -1;
}

// One connection attempt, bounded by the deadline; the socket, or -1 with errno.
static int connect_once(const struct sockaddr_in* addr, double deadline) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr*)addr, sizeof(*addr)) != 0) {
        if (errno != EINPROGRESS) goto fail;
        struct pollfd pfd = {fd, POLLOUT, 0};
        int ready;
        do ready = poll(&pfd, 1, ms_until(deadline)); while (ready < 0 && errno == EINTR);
        if (ready == 0) errno = ETIMEDOUT;
        if (ready <= 0) goto fail;
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error) { errno = so_error; goto fail; }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

// Sends this rank's hello on fd and reads rank 0's answer before the deadline: ANSWER_OK with
// blob filled, or ANSWER_REFUSED with err holding rank 0's reason, or ANSWER_NONE with err
// saying what came instead. The reason is a peer's text: its control characters (newlines,
// escapes) become spaces, so that it prints as one line.
static int ask_rank0(int fd, const char* master_addr, int port, int rank, int world_size,
                     void* blob, size_t blob_len, double deadline, char* err) {
    uint32_t hello[4] = {htonl(HELLO_MAGIC), htonl((uint32_t)rank), htonl((uint32_t)world_size),
                         htonl((uint32_t)blob_len)};
    uint32_t answer[3];
    if (send_all(fd, hello, sizeof(hello)) != 0 || recv_all(fd, answer, sizeof(answer), deadline) != 0) {
        set_err(err, "rendezvous: rank %d got no answer from rank 0 at %s:%d (%s)", rank,
                master_addr, port, strerror(errno));
        return ANSWER_NONE;
    }
    uint32_t status = ntohl(answer[1]), len = ntohl(answer[2]);
    if (ntohl(answer[0]) != HELLO_MAGIC) {
        set_err(err, "rendezvous: rank %d: %s:%d is not a rank 0 of this program", rank,
                master_addr, port);
        return ANSWER_NONE;
    }
    if (status != STATUS_OK) {
        char reason[ERR_LEN] = "";
        size_t keep = len < ERR_LEN - 1 ? len : ERR_LEN - 1;
        if (recv_all(fd, reason, keep, deadline) != 0) keep = 0;
        for (size_t i = 0; i < keep; i++)
            if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f) reason[i] = ' ';
        reason[keep] = '\0';
        set_err(err, "%s", keep ? reason : "rendezvous: rank 0 refused without a reason");
        return ANSWER_REFUSED;
    }
    if (len != blob_len || recv_all(fd, blob, blob_len, deadline) != 0) {
        set_err(err, "rendezvous: rank %d got a broken id from rank 0 (%u bytes, expected %zu)",
                rank, len, blob_len);
        return ANSWER_NONE;
    }
    return ANSWER_OK;
}

// Rank 0 found its port taken. When the holder is a rank 0 of this program, it refuses this
// second rank 0 and tells every rank why; otherwise the port is another program's.
static int ask_port_holder(int port, int world_size, size_t blob_len, double timeout_s, char* err) {
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    double deadline = now_s() + (timeout_s < PORT_HOLDER_S ? timeout_s : PORT_HOLDER_S);
    int fd = connect_once(&addr, deadline);
    if (fd >= 0) {
        unsigned char id[RENDEZVOUS_MAX_BLOB];
        char reason[ERR_LEN];
        int answer = ask_rank0(fd, "127.0.0.1", port, 0, world_size, id, blob_len, deadline, reason);
        close(fd);
        if (answer == ANSWER_REFUSED) {
            set_err(err, "%s", reason);
            return -1;
        }
    }
    set_err(err, "rendezvous: MASTER_PORT %d is in use on rank 0's node (another run?): pick a "
            "free one", port);
    return -1;
}

// A connection whose hello has not all come yet; it holds up no other.
typedef struct {
    int fd;
    size_t got;             // bytes of hello received
    uint32_t hello[4];
} Pending;

// Takes a complete hello: 1 when it is a rank that had not arrived (fds[rank] set to fd), 0 when
// it is no rank of this program (fd closed), -1 when rank 0 must refuse the run (reason set; this
// connection got it and is closed).
static int admit(int fd, const uint32_t hello[4], int* fds, int world_size, size_t blob_len,
                 char* reason) {
    if (ntohl(hello[0]) != HELLO_MAGIC) {
        close(fd);
        return 0;
    }
    uint32_t rank = ntohl(hello[1]), size = ntohl(hello[2]), len = ntohl(hello[3]);
    if (rank == 0 || (rank < (uint32_t)world_size && fds[rank] >= 0))
        snprintf(reason, ERR_LEN, "rendezvous: rank %u arrived twice: every rank must have its own "
                 "RANK", rank);
    else if (size != (uint32_t)world_size)
        snprintf(reason, ERR_LEN, "rendezvous: rank %u says the world size is %u, rank 0 says %d: "
                 "every rank must be started with the same world size", rank, size, world_size);
    else if (len != blob_len)
        snprintf(reason, ERR_LEN, "rendezvous: rank %u expects a %u-byte id, rank 0 sends %zu: the "
                 "ranks run different builds", rank, len, blob_len);
    else if (rank >= (uint32_t)world_size)
        snprintf(reason, ERR_LEN, "rendezvous: a process says it is rank %u of %d", rank, world_size);
    else {
        fds[rank] = fd;
        return 1;
    }
    send_answer(fd, STATUS_REFUSED, reason, strlen(reason));
    close(fd);
    return -1;
}

static int serve(const char* master_addr, int port, int world_size, const void* blob,
                 size_t blob_len, double timeout_s, char* err) {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) {
        set_err(err, "rendezvous: cannot open a socket: %s", strerror(errno));
        return -1;
    }
    // Lets a new run take a port whose last connections are still in TIME_WAIT; a port with a
    // listener on it still fails to bind.
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(is_loopback(master_addr) ? INADDR_LOOPBACK : INADDR_ANY);
    if (bind(listener, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
        int in_use = errno == EADDRINUSE;
        if (!in_use) set_err(err, "rendezvous: cannot listen on port %d: %s", port, strerror(errno));
        close(listener);
        return in_use ? ask_port_holder(port, world_size, blob_len, timeout_s, err) : -1;
    }
    if (listen(listener, world_size) != 0) {
        set_err(err, "rendezvous: cannot listen on port %d: %s", port, strerror(errno));
        close(listener);
        return -1;
    }

    int max_pending = world_size + STRAY_CONNECTIONS;
    int* fds = malloc((size_t)world_size * sizeof(int));   // by rank; fds[0] unused
    Pending* pending = malloc((size_t)max_pending * sizeof(Pending));
    struct pollfd* pfds = malloc((size_t)(1 + max_pending) * sizeof(struct pollfd));
    if (!fds || !pending || !pfds) {
        free(fds);
        free(pending);
        free(pfds);
        close(listener);
        set_err(err, "rendezvous: out of memory for %d ranks", world_size);
        return -1;
    }
    for (int r = 0; r < world_size; r++) fds[r] = -1;
    char reason[ERR_LEN];
    double deadline = now_s() + timeout_s;
    int arrived = 1, failed = 0, npending = 0;
    while (arrived < world_size && !failed) {
        pfds[0] = (struct pollfd){listener, POLLIN, 0};
        for (int i = 0; i < npending; i++) pfds[1 + i] = (struct pollfd){pending[i].fd, POLLIN, 0};
        int ready = poll(pfds, (nfds_t)(1 + npending), ms_until(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            int n = snprintf(reason, sizeof(reason), "rendezvous at %s:%d: %d of %d ranks did not "
                             "arrive within %g s (missing rank", master_addr, port,
                             world_size - arrived, world_size, timeout_s);
            for (int r = 1, listed = 0; r < world_size && n < (int)sizeof(reason); r++) {
                if (fds[r] >= 0) continue;
                if (listed++ == MISSING_LISTED) {
                    n += snprintf(reason + n, sizeof(reason) - n, ", ...");
                    break;
                }
                n += snprintf(reason + n, sizeof(reason) - n, "%s %d", listed > 1 ? "," : "", r);
            }
            if (n < (int)sizeof(reason)) snprintf(reason + n, sizeof(reason) - n, ")");
            failed = 1;
            break;
        }
        // The hellos' bytes as they come; a connection that stops halfway waits alone.
        int kept = 0;
        for (int i = 0; i < npending; i++) {
            Pending p = pending[i];
            if (pfds[1 + i].revents && !failed) {
                ssize_t n = recv(p.fd, (char*)p.hello + p.got, sizeof(p.hello) - p.got, MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                    close(p.fd);
                    continue;
                }
                if (n > 0) p.got += (size_t)n;
                if (p.got == sizeof(p.hello)) {
                    int admitted = admit(p.fd, p.hello, fds, world_size, blob_len, reason);
                    arrived += admitted == 1;
                    failed = admitted < 0;
                    continue;
                }
            }
            pending[kept++] = p;
        }
        npending = kept;
        if (failed || !(pfds[0].revents & POLLIN)) continue;
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        int out_of_fds = fd < 0 && (errno == EMFILE || errno == ENFILE);
        if (out_of_fds && npending == 0) {
            snprintf(reason, sizeof(reason), "rendezvous: cannot take the ranks' connections: %s",
                     strerror(errno));
            failed = 1;
            break;
        }
        // The oldest connection still silent makes room (or frees the descriptor) for a new one.
        if (out_of_fds || (fd >= 0 && npending == max_pending)) {
            close(pending[0].fd);
            npending--;
            memmove(pending, pending + 1, (size_t)npending * sizeof(Pending));
        }
        if (fd >= 0) pending[npending++] = (Pending){fd, 0, {0}};
    }
    close(listener);
    for (int i = 0; i < npending; i++) close(pending[i].fd);
    free(pending);
    free(pfds);

    int result = 0;
    if (failed) {
        result = refuse_all(fds, world_size, reason, err);
    } else {
        for (int r = 1; r < world_size; r++) {
            if (send_answer(fds[r], STATUS_OK, blob, blob_len) != 0 && result == 0) {
                set_err(err, "rendezvous: rank %d left before it got the id: %s", r, strerror(errno));
                result = -1;
            }
            close(fds[r]);
        }
    }
    free(fds);
    return result;
}

static int join(const char* master_addr, int port, int rank, int world_size, void* blob,
                size_t blob_len, double timeout_s, char* err) {
    double start = now_s(), deadline = start + timeout_s;
    struct addrinfo hints = {0}, *found = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int gai;
    while ((gai = getaddrinfo(master_addr, NULL, &hints, &found)) == EAI_AGAIN && now_s() < deadline)
        usleep((useconds_t)(RETRY_S * 1e6));
    if (gai != 0) {
        set_err(err, "rendezvous: cannot resolve MASTER_ADDR '%s': %s", master_addr, gai_strerror(gai));
        return -1;
    }
    struct sockaddr_in addr = *(struct sockaddr_in*)found->ai_addr;
    freeaddrinfo(found);
    addr.sin_port = htons((uint16_t)port);

    int fd;
    while ((fd = connect_once(&addr, deadline)) < 0) {
        if (now_s() + RETRY_S >= deadline) {
            set_err(err, "rendezvous: rank %d found no rank 0 at %s:%d within %g s (%s)", rank,
                    master_addr, port, timeout_s, strerror(errno));
            return -1;
        }
        usleep((useconds_t)(RETRY_S * 1e6));
    }
    int answer = ask_rank0(fd, master_addr, port, rank, world_size, blob, blob_len,
                           start + 2 * timeout_s, err);
    close(fd);
    return answer == ANSWER_OK ? 0 : -1;
}

int rendezvous(const char* master_addr, int master_port, int rank, int world_size, void* blob,
               size_t blob_len, double timeout_s, char* err) {
    if (world_size < 1 || rank < 0 || rank >= world_size) {
        set_err(err, "rendezvous: rank %d of %d", rank, world_size);
        return -1;
    }
    if (blob_len > RENDEZVOUS_MAX_BLOB) {
        set_err(err, "rendezvous: a %zu-byte blob (at most %d)", blob_len, RENDEZVOUS_MAX_BLOB);
        return -1;
    }
    if (world_size == 1) return 0;
    if (rank == 0)
        return serve(master_addr, master_port, world_size, blob, blob_len, timeout_s, err);
    return join(master_addr, master_port, rank, world_size, blob, blob_len, timeout_s, err);
}

int rendezvous_free_port(char* err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {0};
    socklen_t len = sizeof(addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0 ||
        getsockname(fd, (struct sockaddr*)&addr, &len) != 0) {
        set_err(err, "cannot find a free port on 127.0.0.1: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(addr.sin_port);
}
