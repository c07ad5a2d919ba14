/*
 * WebSocket echo benchmark (issue 38): a one-thread epoll client and a one-thread epoll echo server, so neither end
 * is the bottleneck when a proxy (the gateway's `websocket: true` route, nginx `proxy_pass` with Upgrade) sits
 * between them.
 *
 *   wsbench server PORT
 *       RFC 6455 echo server on 127.0.0.1:PORT: answers the opening handshake (§4.2.2), then sends every data frame
 *       back unmasked with the same opcode; answers a Close with a Close and closes.
 *   wsbench client PORT TUNNELS SIZE SECONDS [WARMUP_SECONDS [MESSAGES]]
 *       opens TUNNELS connections to 127.0.0.1:PORT (path /ws), each upgraded with its own handshake, then keeps one
 *       SIZE-byte binary message in flight per tunnel (masked, §5.3, with a random per-tunnel key) and sends the next
 *       when its echo is back and equal; counts echoes during SECONDS after WARMUP_SECONDS (default 1). With
 *       MESSAGES, it stops as soon as that many echoes were counted (for instructions per message under callgrind).
 *       Prints "messages=N seconds=S rate=R/s tunnels=T size=B errors=E".
 *   wsbench idle PORT TUNNELS SIZE
 *       opens TUNNELS tunnels one after the other, echoes one SIZE-byte message through each (so both directions'
 *       buffers were used once), prints "idle=N" and then holds them all open, idle, until killed.
 *
 * Build: cc -O2 -o wsbench Benchmarks/wsbench.c -lcrypto
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (256 * 1024)

typedef struct {
    int fd;
    int upgraded;
    size_t inLen;
    unsigned char *in;
    size_t outLen, outOff;
    unsigned char *out;
    /* client only */
    unsigned char *frame; /* the masked frame to send */
    size_t frameLen;
    unsigned char *payload;
} Conn;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static Conn *newConn(int fd) {
    Conn *c = calloc(1, sizeof(Conn));
    c->fd = fd;
    c->in = malloc(BUF);
    c->out = malloc(BUF);
    return c;
}

static void freeConn(Conn *c) {
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c->frame);
    free(c->payload);
    free(c);
}

/* Writes what is queued; returns -1 on a broken connection, 1 when some stays queued. */
static int flushOut(Conn *c) {
    while (c->outOff < c->outLen) {
        ssize_t n = write(c->fd, c->out + c->outOff, c->outLen - c->outOff);
        if (n < 0) {
            if (errno == EAGAIN) return 1;
            if (errno == EINTR) continue;
            return -1;
        }
        c->outOff += (size_t)n;
    }
    c->outOff = c->outLen = 0;
    return 0;
}

static int queue(Conn *c, const void *bytes, size_t n) {
    if (c->outOff > 0 && c->outOff == c->outLen) c->outOff = c->outLen = 0;
    if (c->outLen + n > BUF) {
        memmove(c->out, c->out + c->outOff, c->outLen - c->outOff);
        c->outLen -= c->outOff;
        c->outOff = 0;
        if (c->outLen + n > BUF) return -1;
    }
    memcpy(c->out + c->outLen, bytes, n);
    c->outLen += n;
    return 0;
}

static int setNonBlocking(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Frame header: returns the header length, or 0 when incomplete; sets opcode, masked, mask, payload length. */
static size_t frameHeader(const unsigned char *p, size_t n, int *opcode, int *masked, unsigned char mask[4], uint64_t *len) {
    if (n < 2) return 0;
    *opcode = p[0] & 0x0f;
    *masked = (p[1] & 0x80) != 0;
    uint64_t l = p[1] & 0x7f;
    size_t h = 2;
    if (l == 126) {
        if (n < 4) return 0;
        l = ((uint64_t)p[2] << 8) | p[3];
        h = 4;
    } else if (l == 127) {
        if (n < 10) return 0;
        l = 0;
        for (int i = 0; i < 8; i++) l = (l << 8) | p[2 + i];
        h = 10;
    }
    if (*masked) {
        if (n < h + 4) return 0;
        memcpy(mask, p + h, 4);
        h += 4;
    }
    *len = l;
    return h;
}

static size_t writeHeader(unsigned char *p, int opcode, uint64_t len, const unsigned char *mask) {
    size_t h = 2;
    p[0] = 0x80 | (unsigned char)opcode;
    if (len < 126) {
        p[1] = (unsigned char)len;
    } else if (len < 65536) {
        p[1] = 126;
        p[2] = (unsigned char)(len >> 8);
        p[3] = (unsigned char)len;
        h = 4;
    } else {
        p[1] = 127;
        for (int i = 0; i < 8; i++) p[2 + i] = (unsigned char)(len >> (56 - 8 * i));
        h = 10;
    }
    if (mask) {
        p[1] |= 0x80;
        memcpy(p + h, mask, 4);
        h += 4;
    }
    return h;
}

static const char *GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* ---- server ---- */

static int serverHandshake(Conn *c) {
    unsigned char *end = memmem(c->in, c->inLen, "\r\n\r\n", 4);
    if (!end) return c->inLen < BUF ? 0 : -1;
    size_t headLen = (size_t)(end - c->in) + 4;
    char key[128] = {0};
    const char *name = "sec-websocket-key:";
    for (unsigned char *line = c->in; line < end;) {
        unsigned char *eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
        if (!eol) break;
        if ((size_t)(eol - line) > strlen(name) && strncasecmp((char *)line, name, strlen(name)) == 0) {
            unsigned char *v = line + strlen(name);
            while (*v == ' ') v++;
            size_t n = (size_t)(eol - v);
            if (n >= sizeof key) return -1;
            memcpy(key, v, n);
        }
        line = eol + 2;
    }
    if (!key[0]) return -1;
    char joined[256];
    snprintf(joined, sizeof joined, "%s%s", key, GUID);
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1((unsigned char *)joined, strlen(joined), digest);
    unsigned char accept[64];
    EVP_EncodeBlock(accept, digest, SHA_DIGEST_LENGTH);
    char reply[256];
    int n = snprintf(reply, sizeof reply,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
    if (queue(c, reply, (size_t)n) < 0) return -1;
    memmove(c->in, c->in + headLen, c->inLen - headLen);
    c->inLen -= headLen;
    c->upgraded = 1;
    return 1;
}

/* Echoes every complete frame; returns -1 to close. */
static int serverFrames(Conn *c) {
    size_t off = 0;
    for (;;) {
        int opcode, masked;
        unsigned char mask[4];
        uint64_t len;
        size_t h = frameHeader(c->in + off, c->inLen - off, &opcode, &masked, mask, &len);
        if (!h || c->inLen - off < h + len) break;
        unsigned char *p = c->in + off + h;
        if (masked)
            for (uint64_t i = 0; i < len; i++) p[i] ^= mask[i & 3];
        unsigned char hdr[14];
        size_t hl = writeHeader(hdr, opcode == 9 ? 10 : opcode, len, NULL);
        if (opcode == 10) { off += h + len; continue; }
        if (queue(c, hdr, hl) < 0 || queue(c, p, len) < 0) return -1;
        off += h + len;
        if (opcode == 8) return -1;
    }
    if (off) {
        memmove(c->in, c->in + off, c->inLen - off);
        c->inLen -= off;
    }
    if (c->inLen == BUF) return -1;
    return 0;
}

static int runServer(int port) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(lfd, 4096) < 0) die("listen");
    setNonBlocking(lfd);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        for (int i = 0; i < n; i++) {
            Conn *c = events[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setNonBlocking(fd);
                    Conn *nc = newConn(fd);
                    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            int bad = 0;
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                for (;;) {
                    ssize_t r = read(c->fd, c->in + c->inLen, BUF - c->inLen);
                    if (r > 0) {
                        c->inLen += (size_t)r;
                        if (!c->upgraded) {
                            int hs = serverHandshake(c);
                            if (hs < 0) { bad = 1; break; }
                            if (hs == 0) continue;
                        }
                        if (serverFrames(c) < 0) { flushOut(c); bad = 1; break; }
                        if (flushOut(c) < 0) { bad = 1; break; }
                        continue;
                    }
                    if (r == 0) { bad = 1; break; }
                    if (errno == EINTR) continue;
                    if (errno != EAGAIN) bad = 1;
                    break;
                }
            }
            if (!bad && (events[i].events & EPOLLOUT) && flushOut(c) < 0) bad = 1;
            if (bad) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                freeConn(c);
            }
        }
    }
    return 0;
}

/* ---- client ---- */

static long long counted, errorsSeen;
static int counting;

static int sendMessage(Conn *c) {
    if (queue(c, c->frame, c->frameLen) < 0) return -1;
    return flushOut(c) < 0 ? -1 : 0;
}

static int clientFrames(Conn *c, size_t size) {
    size_t off = 0;
    for (;;) {
        int opcode, masked;
        unsigned char mask[4];
        uint64_t len;
        size_t h = frameHeader(c->in + off, c->inLen - off, &opcode, &masked, mask, &len);
        if (!h || c->inLen - off < h + len) break;
        if (opcode != 2 || masked || len != size || memcmp(c->in + off + h, c->payload, size) != 0) {
            errorsSeen++;
            return -1;
        }
        off += h + len;
        if (counting) counted++;
        if (sendMessage(c) < 0) return -1;
    }
    if (off) {
        memmove(c->in, c->in + off, c->inLen - off);
        c->inLen -= off;
    }
    return 0;
}

static int runClient(int port, int tunnels, size_t size, double seconds, double warmup, long long messages) {
    int ep = epoll_create1(0);
    Conn **conns = calloc((size_t)tunnels, sizeof(Conn *));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    FILE *urandom = fopen("/dev/urandom", "rb");
    for (int t = 0; t < tunnels; t++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        unsigned char nonce[16], key[32];
        if (fread(nonce, 1, 16, urandom) != 16) die("urandom");
        EVP_EncodeBlock(key, nonce, 16);
        char req[512];
        int n = snprintf(req, sizeof req,
                         "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", port, key);
        if (write(fd, req, (size_t)n) != n) die("write handshake");
        Conn *c = newConn(fd);
        /* Blocking read of the 101 (each tunnel is opened before the next). */
        for (;;) {
            ssize_t r = read(fd, c->in + c->inLen, BUF - c->inLen);
            if (r <= 0) { fprintf(stderr, "wsbench: handshake %d: connection closed\n", t); exit(1); }
            c->inLen += (size_t)r;
            unsigned char *end = memmem(c->in, c->inLen, "\r\n\r\n", 4);
            if (!end) continue;
            if (c->inLen < 12 || memcmp(c->in, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "wsbench: handshake %d refused: %.*s\n", t, (int)(end - c->in), c->in);
                exit(1);
            }
            size_t headLen = (size_t)(end - c->in) + 4;
            memmove(c->in, c->in + headLen, c->inLen - headLen);
            c->inLen -= headLen;
            break;
        }
        c->upgraded = 1;
        c->payload = malloc(size);
        if (fread(c->payload, 1, size, urandom) != size) die("urandom");
        unsigned char mask[4];
        if (fread(mask, 1, 4, urandom) != 4) die("urandom");
        c->frame = malloc(size + 14);
        size_t h = writeHeader(c->frame, 2, size, mask);
        for (size_t i = 0; i < size; i++) c->frame[h + i] = c->payload[i] ^ mask[i & 3];
        c->frameLen = h + size;
        setNonBlocking(fd);
        struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        conns[t] = c;
    }
    fclose(urandom);
    for (int t = 0; t < tunnels; t++)
        if (sendMessage(conns[t]) < 0) die("first message");
    double start = now(), measureFrom = start + warmup, until = measureFrom + seconds, measuredStart = 0;
    struct epoll_event events[256];
    int open = tunnels;
    for (;;) {
        double t = now();
        if (!counting && t >= measureFrom) { counting = 1; measuredStart = t; counted = 0; }
        if (t >= until || (messages > 0 && counted >= messages)) break;
        int n = epoll_wait(ep, events, 256, 100);
        if (n < 0 && errno == EINTR) continue;
        for (int i = 0; i < n; i++) {
            Conn *c = events[i].data.ptr;
            if (c->fd < 0) continue;
            int bad = 0;
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                for (;;) {
                    ssize_t r = read(c->fd, c->in + c->inLen, BUF - c->inLen);
                    if (r > 0) {
                        c->inLen += (size_t)r;
                        if (clientFrames(c, size) < 0) { bad = 1; break; }
                        continue;
                    }
                    if (r == 0) { bad = 1; break; }
                    if (errno == EINTR) continue;
                    if (errno != EAGAIN) bad = 1;
                    break;
                }
            }
            if (!bad && (events[i].events & EPOLLOUT) && flushOut(c) < 0) bad = 1;
            if (bad) {
                errorsSeen++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                if (--open == 0) break;
            }
        }
        if (open == 0) break;
    }
    double elapsed = now() - measuredStart;
    printf("messages=%lld seconds=%.3f rate=%.0f/s tunnels=%d size=%zu errors=%lld\n", counted, elapsed,
           counted / elapsed, open, size, errorsSeen);
    return errorsSeen ? 1 : 0;
}

static int openTunnel(int port, size_t size, unsigned char *frame, unsigned char *buf) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) return -1;
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", port);
    if (write(fd, req, (size_t)n) != n) return -1;
    size_t have = 0, headLen = 0;
    while (!headLen) {
        ssize_t r = read(fd, buf + have, BUF - have);
        if (r <= 0) return -1;
        have += (size_t)r;
        unsigned char *end = memmem(buf, have, "\r\n\r\n", 4);
        if (end) headLen = (size_t)(end - buf) + 4;
    }
    if (memcmp(buf, "HTTP/1.1 101", 12) != 0) return -1;
    size_t h = writeHeader(frame, 2, size, (const unsigned char *)"\x11\x22\x33\x44");
    if (write(fd, frame, h + size) != (ssize_t)(h + size)) return -1;
    size_t want = headLen + (size < 126 ? 2 : size < 65536 ? 4 : 10) + size;
    while (have < want) {
        ssize_t r = read(fd, buf + have, BUF - have);
        if (r <= 0) return -1;
        have += (size_t)r;
    }
    return fd;
}

static int runIdle(int port, int tunnels, size_t size) {
    unsigned char *frame = calloc(1, size + 14), *buf = malloc(BUF);
    for (int t = 0; t < tunnels; t++) {
        if (openTunnel(port, size, frame, buf) < 0) {
            fprintf(stderr, "wsbench: idle tunnel %d failed: %s\n", t, strerror(errno));
            return 1;
        }
    }
    printf("idle=%d\n", tunnels);
    fflush(stdout);
    for (;;) pause();
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "idle") == 0) return runIdle(atoi(argv[2]), atoi(argv[3]), (size_t)atol(argv[4]));
    if (argc >= 3 && strcmp(argv[1], "server") == 0) return runServer(atoi(argv[2]));
    if (argc >= 6 && strcmp(argv[1], "client") == 0)
        return runClient(atoi(argv[2]), atoi(argv[3]), (size_t)atol(argv[4]), atof(argv[5]), argc > 6 ? atof(argv[6]) : 1.0,
                         argc > 7 ? atoll(argv[7]) : 0);
    fprintf(stderr, "usage: wsbench server PORT | wsbench client PORT TUNNELS SIZE SECONDS [WARMUP] | wsbench idle PORT TUNNELS SIZE\n");
    return 2;
}
