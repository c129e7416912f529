/* The connection's guard (guard.c): a child process that aborts the
 * mount's FUSE connection when the daemon dies without ending it.
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

/* Starts the guard of the connection mounted on @mnt (an absolute path),
 * from the thread whose exit means the daemon's death (the main one).
 * NULL, with *@why set, if the connection cannot be aborted from here:
 * no fusectl (/sys/fs/fuse/connections) and not root to mount one of its
 * own. */
struct kvt_guard *kvt_guard_start(const char *mnt, int *why);
/* Asks the guard to abort the connection now: a stop of the daemon that
 * waits on the kernel (stopping.h).  False if there is no guard. */
bool kvt_guard_abort(struct kvt_guard *g);
/* Stops the guard: the daemon ends its connection itself. */
void kvt_guard_stop(struct kvt_guard *g);
