// distributed/rendezvous.c: the TCP meeting of the ranks. Each rank other than 0 sends a hello
// (magic, rank, world size, blob size, four big-endian uint32); rank 0 answers each with
// (magic, status, length) and then the blob when status is 0, or its reason for refusing.
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
        if (errno == EADDRINUSE)
            set_err(err, "rendezvous: MASTER_PORT %d is in use on rank 0's node (another run?): "
                    "pick a free one", port);
        else
            set_err(err, "rendezvous: cannot listen on port %d: %s", port, strerror(errno));
        close(listener);
        return -1;
    }
    if (listen(listener, world_size) != 0) {
        set_err(err, "rendezvous: cannot listen on port %d: %s", port, strerror(errno));
        close(listener);
        return -1;
    }

    int* fds = malloc((size_t)world_size * sizeof(int));   // by rank; fds[0] unused
    if (!fds) {
        close(listener);
        set_err(err, "rendezvous: out of memory for %d ranks", world_size);
        return -1;
    }
    for (int r = 0; r < world_size; r++) fds[r] = -1;
    char reason[ERR_LEN];
    double deadline = now_s() + timeout_s;
    int arrived = 1, failed = 0;
    while (arrived < world_size && !failed) {
        struct pollfd pfd = {listener, POLLIN, 0};
        int ready = poll(&pfd, 1, ms_until(deadline));
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
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        uint32_t hello[4];
        // A connection that says nothing or is not a rank is dropped; the time-out still holds.
        if (recv_all(fd, hello, sizeof(hello), deadline) != 0 || ntohl(hello[0]) != HELLO_MAGIC) {
            close(fd);
            continue;
        }
        uint32_t rank = ntohl(hello[1]), size = ntohl(hello[2]), len = ntohl(hello[3]);
        if (size != (uint32_t)world_size)
            snprintf(reason, sizeof(reason), "rendezvous: rank %u says the world size is %u, rank 0 "
                     "says %d: every rank must be started with the same world size", rank, size,
                     world_size);
        else if (len != blob_len)
            snprintf(reason, sizeof(reason), "rendezvous: rank %u expects a %u-byte id, rank 0 "
                     "sends %zu: the ranks run different builds", rank, len, blob_len);
        else if (rank == 0 || rank >= (uint32_t)world_size)
            snprintf(reason, sizeof(reason), "rendezvous: a second process says it is rank %u of "
                     "%d", rank, world_size);
        else if (fds[rank] >= 0)
            snprintf(reason, sizeof(reason), "rendezvous: rank %u arrived twice: every rank must "
                     "have its own RANK", rank);
        else {
            fds[rank] = fd;
            arrived++;
            continue;
        }
        send_answer(fd, STATUS_REFUSED, reason, strlen(reason));
        close(fd);
        failed = 1;
    }
    close(listener);

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
    uint32_t hello[4] = {htonl(HELLO_MAGIC), htonl((uint32_t)rank), htonl((uint32_t)world_size),
                         htonl((uint32_t)blob_len)};
    uint32_t answer[3];
    if (send_all(fd, hello, sizeof(hello)) != 0 ||
        recv_all(fd, answer, sizeof(answer), start + 2 * timeout_s) != 0) {
        set_err(err, "rendezvous: rank %d got no answer from rank 0 at %s:%d (%s)", rank,
                master_addr, port, strerror(errno));
        close(fd);
        return -1;
    }
    uint32_t status = ntohl(answer[1]), len = ntohl(answer[2]);
    int result = -1;
    if (ntohl(answer[0]) != HELLO_MAGIC) {
        set_err(err, "rendezvous: rank %d: %s:%d is not a rank 0 of this program", rank,
                master_addr, port);
    } else if (status != STATUS_OK) {
        char reason[ERR_LEN] = "";
        size_t keep = len < ERR_LEN - 1 ? len : ERR_LEN - 1;
        if (recv_all(fd, reason, keep, start + 2 * timeout_s) != 0) keep = 0;
        reason[keep] = '\0';
        set_err(err, "%s", keep ? reason : "rendezvous: rank 0 refused without a reason");
    } else if (len != blob_len || recv_all(fd, blob, blob_len, start + 2 * timeout_s) != 0) {
        set_err(err, "rendezvous: rank %d got a broken id from rank 0 (%u bytes, expected %zu)",
                rank, len, blob_len);
    } else {
        result = 0;
    }
    close(fd);
    return result;
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
