/* A stop that cannot end by itself.  At SIGTERM or SIGINT libfuse stops
 * reading requests and waits for its workers; the daemon then waits for
 * its notifier.  A worker or the notifier may be in an invalidation
 * that waits for a directory's lock (notify.h), held by a client whose
 * request arrived after the last read: nobody will answer it, so the
 * client, the invalidation and the stop wait forever.  Once a stop has
 * run for KVT_STOP_GRACE_S without getting past them, the guard aborts
 * the connection (guard.h): the clients' waiting calls fail, their locks
 * go, and the stop goes on.  A stop by unmount needs none of this: the
 * kernel ends the connection's requests itself. */
#pragma once
#include <stdbool.h>

#include "guard.h"

#define KVT_STOP_GRACE_S 10

struct kvt_stopping;

/* Watches stops from now on; call after fuse_set_signal_handlers, whose
 * handlers it calls after its own.  @g may be NULL (no guard: a stop
 * that cannot end is only logged). */
struct kvt_stopping *kvt_stopping_watch(struct kvt_guard *g);
/* The stop got past what may wait on a client (the notifier is gone);
 * libfuse's handlers are back.  Call before fuse_remove_signal_handlers.
 * True if the connection was aborted: libfuse then leaves the mount in
 * place, dead (kvt_stopping_unmount). */
bool kvt_stopping_done(struct kvt_stopping *s);
/* Detaches the dead mount on @mnt, as fusermount3 -u -z does. */
void kvt_stopping_unmount(const char *mnt);
