#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>
/* SQLITE_TRANSIENT is a macro Swift cannot import: tells SQLite to copy bound bytes. */
static inline void (*CSQLite_TRANSIENT(void))(void *) { return (void (*)(void *))-1; }
#endif
