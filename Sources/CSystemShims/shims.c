#define _GNU_SOURCE
#include <malloc.h>
#include "CSystemShims.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

const int CSystemShims_EPOLL_CTL_ADD = EPOLL_CTL_ADD;
const int CSystemShims_EPOLL_CTL_MOD = EPOLL_CTL_MOD;
const int CSystemShims_EPOLL_CTL_DEL = EPOLL_CTL_DEL;
const uint32_t CSystemShims_EPOLLIN = EPOLLIN;
const uint32_t CSystemShims_EPOLLOUT = EPOLLOUT;
const uint32_t CSystemShims_EPOLLERR = EPOLLERR;
const uint32_t CSystemShims_EPOLLHUP = EPOLLHUP;
const uint32_t CSystemShims_EPOLLRDHUP = EPOLLRDHUP;
const uint32_t CSystemShims_EPOLLET = EPOLLET;

int CSystemShims_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int CSystemShims_epoll_ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = 0;
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev);
}

int CSystemShims_epoll_wait(int epfd, int32_t *fds, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n;
    do { n = (int)syscall(SYS_epoll_wait, epfd, evs, max, timeout_ms); } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) { fds[i] = evs[i].data.fd; events[i] = evs[i].events; }
    return n;
}

/* recvfrom(2), not read(2): every caller reads a socket, and read(2) goes through vfs_read and sock_read_iter (file
 * permission and notification hooks, an iov_iter) before the same sock_recvmsg; recvfrom goes to it directly. */
ssize_t CSystemShims_read(int fd, void *buf, size_t count) {
    return syscall(SYS_recvfrom, fd, buf, count, 0, NULL, NULL);
}

ssize_t CSystemShims_send(int fd, const void *buf, size_t count, int flags) {
    return syscall(SYS_sendto, fd, buf, count, flags, NULL, 0);
}

int CSystemShims_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int CSystemShims_accept4(int fd, struct sockaddr *addr, socklen_t *len) {
    int r;
    do { r = accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC); } while (r < 0 && errno == EINTR);
    return r;
}

int CSystemShims_socket_nonblocking(int domain, int type) {
    return socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int CSystemShims_block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    signal(SIGPIPE, SIG_IGN);
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void CSystemShims_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

int CSystemShims_wait_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {}
    return sig;
}

int CSystemShims_wait_signal_timeout(int timeout_ms) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    int r = sigtimedwait(&set, NULL, &ts);
    return r < 0 ? 0 : r;
}

void CSystemShims_malloc_trim(void) {
    malloc_trim(0);
}

uint64_t CSystemShims_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t CSystemShims_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int ok = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    if (ok != 2) return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}
