/* The connection's guard (guard.c): a child process that aborts the
 * mount's FUSE connection when the daemon dies without ending it, as
 * soon as it crashes (guard.c), or when its stop does not end (below).
 *
 * The kernel ends a connection when its last /dev/fuse descriptor
 * closes, that is when the daemon's last thread has exited.  A thread
 * stuck in the kernel keeps it: an invalidation waits for a directory's
 * lock (notify.h) that a client holds while it waits for a reply the
 * killed daemon will never send.  Without the guard, the client, the
 * daemon and the mount then wait forever. */
#pragma once
#include <stdbool.h>

struct kvt_guard;

/* A stop (SIGTERM, SIGINT) that cannot end by itself.  libfuse stops
 * reading requests and waits for its workers; the daemon then waits for
 * its notifier.  A worker or the notifier may be in an invalidation that
 * waits for a directory's lock (notify.h), held by a client whose request
 * came after the last read: nobody will answer it, so the client, the
 * invalidation and the stop wait forever.  The guard is told of each stop
 * signal (the daemon's handler runs before libfuse's), and aborts the
 * connection once a stop has run this long without stopping the guard:
 * the clients' waiting calls fail, their locks go, the stop goes on.  A
 * stop by unmount needs none of this: the kernel ends the connection's
 * requests itself. */
#define KVT_GUARD_STOP_GRACE_S 10

/* Starts the guard of the connection mounted on @mnt (an absolute path),
 * from the thread whose exit means the daemon's death (the main one),
 * after fuse_set_signal_handlers; one guard per process.  NULL, with
 * *@why set, if the connection cannot be aborted from here: no fusectl
 * (/sys/fs/fuse/connections) and not root to mount one of its own. */
struct kvt_guard *kvt_guard_start(const char *mnt, int *why);
/* Stops the guard, once the stop got past what may wait on a client
 * (the notifier is gone, the session unmounted), and puts libfuse's
 * signal handlers back; call before fuse_remove_signal_handlers.  True if
 * the guard aborted the connection: libfuse's unmount then left the mount
 * in place, dead (kvt_guard_unmount_dead). */
bool kvt_guard_stop(struct kvt_guard *g);
/* Detaches the dead mount on @mnt, as fusermount3 -u -z does. */
void kvt_guard_unmount_dead(const char *mnt);
