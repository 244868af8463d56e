/*
 * crashfs: an LD_PRELOAD shim that records, below SQLite, every write, truncate, unlink and sync
 * a process makes to files under one directory, so that a test can rebuild what a disk would
 * hold after a power loss at the moment the process is killed (tests/crashfs/replay.py).
 *
 *   CRASHFS_DIR=/path/to/db  CRASHFS_LOG=/path/to/log  LD_PRELOAD=build/crashfs.so  python ...
 *
 * The process runs on the real files as usual; each operation on a file under CRASHFS_DIR
 * (except SQLite's -shm, which is never durable state) is appended to CRASHFS_LOG in one write()
 * after the real call returned, so the log's order is the order the calls completed in, and a
 * sync is in the log before the caller can act on it (acknowledge a commit). Records:
 *
 *   u8 op ('W' write, 'T' truncate, 'S' sync, 'U' unlink), u32 path length, path,
 *   i64 offset (W) or length (T), i64 data length (W), data (W)
 *
 * Built by the crash-consistency test (cc -shared -fPIC -O2 -o build/crashfs.so crashfs.c -ldl).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

static char *paths[MAX_FDS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *dir;
static size_t dir_len;
static int log_fd = -1;
static int ready;

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_unlink)(const char *);

static void init(void) {
    if (ready) return;
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
    real_close = dlsym(RTLD_NEXT, "close");
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    const char *d = getenv("CRASHFS_DIR");
    const char *l = getenv("CRASHFS_LOG");
    if (d && l) {
        dir = strdup(d);
        dir_len = strlen(dir);
        log_fd = real_open(l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            /* A process that cannot log would leave writes out of the rebuild: fail loudly. */
            static const char msg[] = "crashfs: cannot open CRASHFS_LOG\n";
            (void)!real_write(2, msg, sizeof msg - 1);
            abort();
        }
    }
    ready = 1;
}

static int tracked_path(const char *p) {
    if (!dir || !p || p[0] != '/') return 0;
    if (strncmp(p, dir, dir_len) != 0 || (p[dir_len] != '/' && p[dir_len] != 0)) return 0;
    size_t n = strlen(p);
    return !(n > 4 && strcmp(p + n - 4, "-shm") == 0);
}

static void log_op(char op, const char *path, int64_t a, const void *data, int64_t len) {
    uint32_t plen = (uint32_t)strlen(path);
    size_t n = 1 + 4 + plen + 8 + 8 + (op == 'W' ? (size_t)len : 0);
    char *buf = malloc(n);
    if (!buf) abort();
    char *q = buf;
    *q++ = op;
    memcpy(q, &plen, 4); q += 4;
    memcpy(q, path, plen); q += plen;
    memcpy(q, &a, 8); q += 8;
    memcpy(q, &len, 8); q += 8;
    if (op == 'W') memcpy(q, data, (size_t)len);
    pthread_mutex_lock(&mu);
    size_t off = 0;
    while (off < n) {
        ssize_t w = real_write(log_fd, buf + off, n - off);
        if (w <= 0) { if (errno == EINTR) continue; abort(); }
        off += (size_t)w;
    }
    pthread_mutex_unlock(&mu);
    free(buf);
}

/* The tracked path of fd (a copy the caller frees), or NULL. */
static char *path_of(int fd) {
    if (fd < 0 || fd >= MAX_FDS || log_fd < 0) return NULL;
    pthread_mutex_lock(&mu);
    char *p = paths[fd] ? strdup(paths[fd]) : NULL;
    pthread_mutex_unlock(&mu);
    return p;
}

static void remember(int fd, const char *path, int flags) {
    if (fd < 0 || fd >= MAX_FDS || log_fd < 0) return;
    char *full = NULL;
    if (path && path[0] == '/') full = realpath(path, NULL);
    pthread_mutex_lock(&mu);
    free(paths[fd]);
    paths[fd] = NULL;
    if (full && tracked_path(full)) paths[fd] = full; else free(full);
    char *p = paths[fd] ? strdup(paths[fd]) : NULL;
    pthread_mutex_unlock(&mu);
    if (p && (flags & O_TRUNC)) log_op('T', p, 0, NULL, 0);
    free(p);
}

#define OPEN_BODY(call)                                   \
    init();                                               \
    mode_t mode = 0;                                      \
    if (flags & (O_CREAT | O_TMPFILE)) {                  \
        va_list ap; va_start(ap, flags);                  \
        mode = va_arg(ap, mode_t); va_end(ap);            \
    }                                                     \
    int fd = call;                                        \
    remember(fd, path, flags);                            \
    return fd;

int open(const char *path, int flags, ...) { OPEN_BODY(real_open(path, flags, mode)) }
int open64(const char *path, int flags, ...) { OPEN_BODY(real_open64(path, flags, mode)) }
int openat(int dfd, const char *path, int flags, ...) { OPEN_BODY(real_openat(dfd, path, flags, mode)) }
int openat64(int dfd, const char *path, int flags, ...) { OPEN_BODY(real_openat64(dfd, path, flags, mode)) }

int close(int fd) {
    init();
    if (fd >= 0 && fd < MAX_FDS && log_fd >= 0) {
        pthread_mutex_lock(&mu);
        free(paths[fd]);
        paths[fd] = NULL;
        pthread_mutex_unlock(&mu);
    }
    return real_close(fd);
}

static ssize_t logged_write(int fd, const void *buf, ssize_t r, off_t at) {
    if (r > 0) {
        char *p = path_of(fd);
        if (p) { log_op('W', p, at, buf, r); free(p); }
    }
    return r;
}

ssize_t write(int fd, const void *buf, size_t n) {
    init();
    char *p = path_of(fd);
    off_t at = p ? lseek(fd, 0, SEEK_CUR) : 0;
    free(p);
    return logged_write(fd, buf, real_write(fd, buf, n), at);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t at) {
    init();
    return logged_write(fd, buf, real_pwrite(fd, buf, n, at), at);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t at) {
    init();
    return logged_write(fd, buf, real_pwrite64(fd, buf, n, at), at);
}

/* A sync makes durable what was written before it began, not what other threads or processes
   write while it runs: 'B' (begin) is logged before the real call and 'S' (done) after it
   succeeded, both with the same token (process id and a counter); the rebuild counts a done
   sync from its begin record. */
static int64_t next_sync;

static int logged_sync(int fd, int (*real)(int)) {
    char *p = path_of(fd);
    int64_t token = 0;
    if (p) {
        pthread_mutex_lock(&mu);
        token = ((int64_t)getpid() << 32) | (int64_t)(++next_sync & 0xffffffff);
        pthread_mutex_unlock(&mu);
        log_op('B', p, token, NULL, 0);
    }
    int r = real(fd);
    if (p) {
        if (r == 0) log_op('S', p, token, NULL, 0);
        free(p);
    }
    return r;
}

int fsync(int fd) { init(); return logged_sync(fd, real_fsync); }
int fdatasync(int fd) { init(); return logged_sync(fd, real_fdatasync); }

static int logged_truncate(int fd, off_t len, int r) {
    if (r == 0) {
        char *p = path_of(fd);
        if (p) { log_op('T', p, len, NULL, 0); free(p); }
    }
    return r;
}

int ftruncate(int fd, off_t len) { init(); return logged_truncate(fd, len, real_ftruncate(fd, len)); }
int ftruncate64(int fd, off_t len) { init(); return logged_truncate(fd, len, real_ftruncate64(fd, len)); }

int unlink(const char *path) {
    init();
    char *full = (path && path[0] == '/') ? realpath(path, NULL) : NULL;
    int r = real_unlink(path);
    if (r == 0 && full && log_fd >= 0 && tracked_path(full)) log_op('U', full, 0, NULL, 0);
    free(full);
    return r;
}
