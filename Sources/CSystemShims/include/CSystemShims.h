#ifndef CSYSTEMSHIMS_H
#define CSYSTEMSHIMS_H
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <signal.h>
#include <pthread.h>

/* epoll: the event is passed as (events, fd) so Swift never sees the packed struct. */
int CSystemShims_epoll_create(void);
int CSystemShims_epoll_ctl(int epfd, int op, int fd, uint32_t events);
/* Waits; fills fds[i]/events[i] for i < return value. Returns -1 with errno on error. */
int CSystemShims_epoll_wait(int epfd, int32_t *fds, uint32_t *events, int max, int timeout_ms);

extern const int CSystemShims_EPOLL_CTL_ADD;
extern const int CSystemShims_EPOLL_CTL_MOD;
extern const int CSystemShims_EPOLL_CTL_DEL;
extern const uint32_t CSystemShims_EPOLLIN;
extern const uint32_t CSystemShims_EPOLLOUT;
extern const uint32_t CSystemShims_EPOLLERR;
extern const uint32_t CSystemShims_EPOLLHUP;
extern const uint32_t CSystemShims_EPOLLRDHUP;
extern const uint32_t CSystemShims_EPOLLET;

/* A socket read (recv(2), as recvfrom with no address: sockets only) and send(2) (as sendto with no address), and
   epoll_wait(2) above, by syscall(2): the same system calls without glibc's cancellation-point wrappers, which in a
   process with more than one thread enable and disable asynchronous cancellation around each call (about 30
   instructions, several times per request). The gateway never cancels a thread. -1 with errno on error, as the
   wrappers. */
ssize_t CSystemShims_read(int fd, void *buf, size_t count);
ssize_t CSystemShims_send(int fd, const void *buf, size_t count, int flags);

int CSystemShims_eventfd(void);
int CSystemShims_accept4(int fd, struct sockaddr *addr, socklen_t *len);
int CSystemShims_socket_nonblocking(int domain, int type);

/* Blocks SIGTERM, SIGINT, SIGHUP (and ignores SIGPIPE) in the calling thread; threads created later inherit it. */
int CSystemShims_block_signals(void);
/* Ignores SIGPIPE process-wide: OpenSSL writes with write(2), so a peer closing a TLS connection must be an
   EPIPE error, not a signal that kills the process. */
void CSystemShims_ignore_sigpipe(void);
/* Waits for one of the blocked signals; returns its number. */
int CSystemShims_wait_signal(void);
/* Waits for a blocked signal for at most timeout_ms; 0 when none arrived. */
int CSystemShims_wait_signal_timeout(int timeout_ms);

/* Current CLOCK_MONOTONIC time in nanoseconds. */
uint64_t CSystemShims_monotonic_ns(void);
/// Returns free heap memory to the operating system (glibc `malloc_trim(0)`).
void CSystemShims_malloc_trim(void);
/* Resident set size of this process in bytes (from /proc/self/statm), or 0. */
uint64_t CSystemShims_rss_bytes(void);
#endif
