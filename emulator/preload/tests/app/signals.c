/*
 * An MPI program that knows nothing of jitterbench but uses SIGALRM and system calls the way
 * applications do. Built by emulator/preload/tests/signals.rs with mpicc and run under
 * libjitter_preload.so.
 *
 *   signals own-handler        installs its own SIGALRM handler, then MPI_Init; prints
 *                              "initialised" if MPI_Init returned
 *   signals stress LIMIT_S DIR rounds of MPI_Allreduce, MPI_Bcast and MPI_Barrier (every result
 *                              checked), of file writes and reads (every block checksummed) and
 *                              of a blocking pipe read (a thread answers each request 200 µs
 *                              later, so that a signal can interrupt the read)
 *                              until every rank's replay has finished (jb_emulator_finished of
 *                              the preloaded library, found with dlsym) or LIMIT_S seconds
 *                              passed; every system call that fails with EINTR is counted.
 *                              Rank 0 prints one line: "stress rounds R eintr E bad B
 *                              finished F seconds T"; exit 1 unless E = B = 0 and F = 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64 * 1024)
#define SLOTS 16
#define BCAST 16384
#define REDUCE 1024
#define MESSAGE 4096

static long eintr_count, bad_count;

static void own_alarm(int sig) { (void)sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t fnv(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void fill(unsigned char *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (unsigned char)(x >> 56);
    }
}

static void bad(const char *what, long round) {
    if (bad_count++ < 5) fprintf(stderr, "signals: round %ld: %s\n", round, what);
}

/* write/pread the whole buffer, counting EINTR; 0 on success. */
static int write_all(int fd, const unsigned char *p, size_t n, off_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, p + done, n - done, off + (off_t)done);
        if (w < 0 && errno == EINTR) {
            eintr_count++;
            continue;
        }
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

static int read_all(int fd, unsigned char *p, size_t n, off_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, p + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR) {
            eintr_count++;
            continue;
        }
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

/* The pipes of the feeder: requests in, messages out. */
static int ask_fd[2], reply_fd[2];

/* Answers each request byte with a MESSAGE-byte message of byte k % 251 after 200 µs, until the
 * request pipe is closed. SIGALRM is blocked here: the emulator's signal is the main thread's. */
static void *feeder(void *arg) {
    (void)arg;
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    static unsigned char msg[MESSAGE];
    unsigned char c;
    for (long k = 0;; k++) {
        ssize_t r = read(ask_fd[0], &c, 1);
        if (r < 0 && errno == EINTR) {
            k--;
            continue;
        }
        if (r != 1) break;
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
        memset(msg, (int)(k % 251), MESSAGE);
        for (size_t off = 0; off < MESSAGE;) {
            ssize_t w = write(reply_fd[1], msg + off, MESSAGE - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return NULL;
            off += (size_t)w;
        }
    }
    return NULL;
}

/* One request and its message, read while the feeder pauses (blocking), counting EINTR. */
static int ask_and_read(long k, long round) {
    static unsigned char msg[MESSAGE];
    for (;;) {
        ssize_t w = write(ask_fd[1], "?", 1);
        if (w == 1) break;
        if (w < 0 && errno == EINTR) {
            eintr_count++;
            continue;
        }
        return -1;
    }
    for (size_t got = 0; got < MESSAGE;) {
        ssize_t r = read(reply_fd[0], msg + got, MESSAGE - got);
        if (r < 0 && errno == EINTR) {
            eintr_count++;
            continue;
        }
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    for (size_t i = 0; i < MESSAGE; i++)
        if (msg[i] != (unsigned char)(k % 251)) {
            bad("pipe message differs", round);
            break;
        }
    return 0;
}

static int stress(double limit_s, const char *dir) {
    int rank, size;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int (*finished)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "jb_emulator_finished");
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.dat", dir, rank);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    pthread_t feeder_thread;
    if (pipe(ask_fd) != 0 || pipe(reply_fd) != 0 ||
        pthread_create(&feeder_thread, NULL, feeder, NULL) != 0) {
        perror("pipe or thread");
        return 1;
    }
    static unsigned char block[BLOCK], back[BLOCK], buf[BCAST];
    static double vals[REDUCE], sums[REDUCE];
    uint64_t slot_sum[SLOTS] = {0};
    long round = 0;
    int all_finished = 0;
    double t0 = now_s(), elapsed = 0;
    for (;; round++) {
        /* File: a new block in a slot, read back and compared. */
        int slot = (int)(round % SLOTS);
        fill(block, BLOCK, (uint64_t)round * 1000 + (uint64_t)rank);
        slot_sum[slot] = fnv(block, BLOCK);
        if (write_all(fd, block, BLOCK, (off_t)slot * BLOCK) != 0) {
            bad(strerror(errno), round);
            break;
        }
        if (read_all(fd, back, BLOCK, (off_t)slot * BLOCK) != 0) {
            bad(strerror(errno), round);
            break;
        }
        if (fnv(back, BLOCK) != slot_sum[slot]) bad("file block read back differs", round);
        if (ask_and_read(round, round) != 0) {
            bad("pipe failed", round);
            break;
        }
        /* Allreduce: sum of (rank + 1) * (round + i) over ranks. */
        for (int i = 0; i < REDUCE; i++) vals[i] = (double)(rank + 1) * (double)(round + i);
        if (MPI_Allreduce(vals, sums, REDUCE, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS) {
            bad("MPI_Allreduce failed", round);
            break;
        }
        for (int i = 0; i < REDUCE; i++)
            if (sums[i] != (double)size * (size + 1) / 2 * (double)(round + i)) {
                bad("MPI_Allreduce result wrong", round);
                break;
            }
        /* Bcast from a rotating root, checksummed. */
        int root = (int)(round % size);
        fill(buf, BCAST, (uint64_t)round * 7 + 3);
        uint64_t want = fnv(buf, BCAST);
        if (rank != root) memset(buf, 0, BCAST);
        if (MPI_Bcast(buf, BCAST, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS) {
            bad("MPI_Bcast failed", round);
            break;
        }
        if (fnv(buf, BCAST) != want) bad("MPI_Bcast data differs", round);
        if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
            bad("MPI_Barrier failed", round);
            break;
        }
        /* Stop together: when every replay has finished, or at the time limit. */
        int mine = finished == NULL ? 1 : finished() != 0;
        elapsed = now_s() - t0;
        int over = elapsed > limit_s;
        int in[2] = {mine, over}, out[2];
        MPI_Allreduce(in, &out[0], 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&in[1], &out[1], 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        all_finished = out[0];
        if (all_finished || out[1]) break;
    }
    /* Every slot written is read once more, as a whole file. */
    long slots = round + 1 < SLOTS ? round + 1 : SLOTS;
    for (long s = 0; s < slots; s++) {
        if (read_all(fd, back, BLOCK, (off_t)s * BLOCK) != 0 || fnv(back, BLOCK) != slot_sum[s])
            bad("file slot differs at the end", round);
    }
    close(fd);
    unlink(path);
    close(ask_fd[1]);
    pthread_join(feeder_thread, NULL);
    long mine[2] = {eintr_count, bad_count}, total[2];
    MPI_Allreduce(mine, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("stress rounds %ld eintr %ld bad %ld finished %d seconds %.1f\n", round + 1,
               total[0], total[1], all_finished, elapsed);
    return total[0] == 0 && total[1] == 0 && all_finished ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "own-handler") == 0) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_handler = own_alarm;
        sigaction(SIGALRM, &a, NULL);
        MPI_Init(&argc, &argv);
        printf("initialised\n");
        MPI_Finalize();
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "stress") == 0) {
        MPI_Init(&argc, &argv);
        int rc = stress(atof(argv[2]), argv[3]);
        MPI_Finalize();
        return rc;
    }
    fprintf(stderr, "usage: %s own-handler | stress LIMIT_S DIR\n", argv[0]);
    return 2;
}
