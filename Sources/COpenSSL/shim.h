#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#include <stdint.h>
#include <string.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/cms.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

/* SHA-256 one-shot through the low-level functions: `EVP_Digest(..., EVP_sha256(), ...)` fetches the algorithm from
   the provider and allocates a context on every call (about 7,000 instructions for a short input on OpenSSL 3); these
   are the same implementation without either. Deprecated in OpenSSL 3, not removed; the warning is silenced here only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* An input of at most 119 bytes (a replay key's `sub` + "\n" + `jti`, a DPoP proof's key material) is padded here
   (FIPS 180-4 §5.1.1) and its one or two blocks go to SHA256_Update in one call, the state then read out as the digest:
   one pass of the block function over both blocks (its vector code schedules two blocks at once) and no
   SHA256_Final, about 350 instructions less for two blocks. The same digest. */
static inline int COpenSSL_sha256(const void *data, size_t count, unsigned char *out) {
    SHA256_CTX ctx;
    if (SHA256_Init(&ctx) != 1) return 0;
    if (count <= 119) {
        unsigned char blocks[128];
        size_t total = count <= 55 ? 64 : 128;
        if (count > 0) memcpy(blocks, data, count);
        blocks[count] = 0x80;
        memset(blocks + count + 1, 0, total - 8 - (count + 1));
        uint64_t bits = (uint64_t)count << 3;
        for (int i = 0; i < 8; i++) blocks[total - 1 - i] = (unsigned char)(bits >> (8 * i));
        if (SHA256_Update(&ctx, blocks, total) != 1) return 0;
        for (int i = 0; i < 8; i++) {
            uint32_t h = ctx.h[i];
            out[4 * i] = (unsigned char)(h >> 24);
            out[4 * i + 1] = (unsigned char)(h >> 16);
            out[4 * i + 2] = (unsigned char)(h >> 8);
            out[4 * i + 3] = (unsigned char)h;
        }
        return 1;
    }
    if (SHA256_Update(&ctx, data, count) != 1) return 0;
    return SHA256_Final(out, &ctx);
}
#pragma GCC diagnostic pop

/* Macros Swift cannot import, wrapped once. */
static inline long COpenSSL_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long COpenSSL_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_max_proto_version(ctx, version);
}
static inline long COpenSSL_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline long COpenSSL_SSL_CTX_set_options(SSL_CTX *ctx, long options) {
    return (long)SSL_CTX_set_options(ctx, (uint64_t)options);
}

/* TLS transport (EventLoop/TLS*.swift, Gateway/TLS). */
static inline uint64_t COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline uint64_t COpenSSL_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t COpenSSL_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t COpenSSL_SSL_CTX_set_options64(SSL_CTX *ctx, uint64_t options) {
    return SSL_CTX_set_options(ctx, options);
}
static inline long COpenSSL_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long COpenSSL_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline long COpenSSL_SSL_CTX_sess_set_cache_size(SSL_CTX *ctx, long size) {
    return SSL_CTX_sess_set_cache_size(ctx, size);
}
static inline long COpenSSL_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return SSL_CTX_set1_groups_list(ctx, list);
}
static inline long COpenSSL_SSL_set_min_proto_version(SSL *ssl, int version) {
    return SSL_set_min_proto_version(ssl, version);
}
static inline long COpenSSL_SSL_set_max_proto_version(SSL *ssl, int version) {
    return SSL_set_max_proto_version(ssl, version);
}
static inline int COpenSSL_sk_SSL_CIPHER_num(const STACK_OF(SSL_CIPHER) *sk) { return sk_SSL_CIPHER_num(sk); }
static inline const SSL_CIPHER *COpenSSL_sk_SSL_CIPHER_value(const STACK_OF(SSL_CIPHER) *sk, int i) {
    return sk_SSL_CIPHER_value(sk, i);
}
static inline int COpenSSL_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *COpenSSL_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
/* A passphrase callback that always fails: encrypted keys are an error, never a terminal prompt. */
static inline int COpenSSL_no_passphrase_cb(char *buf, int size, int rwflag, void *u) {
    (void)buf; (void)size; (void)rwflag; (void)u;
    return 0;
}
static inline pem_password_cb *COpenSSL_no_passphrase(void) { return COpenSSL_no_passphrase_cb; }
#endif
