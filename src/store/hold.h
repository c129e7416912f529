/* A record held at its name, on lower file systems without
 * RENAME_EXCHANGE (GlusterFS, NFS).
 *
 * A mount that replaces a record must learn exactly which one it
 * replaced, to release that one's object reference: a wrong guess leaks
 * a reference, or releases one twice.  RENAME_EXCHANGE tells at once.
 * Without it, a mount locks the record file that is at the name, checks
 * that it is still there, and only then renames over it or takes it off
 * the name; every mount does so, so while the lock is held nobody else
 * changes the name, and the record under the lock is exactly the one the
 * step replaces.  The lock is flock(2) on the record file: the file
 * system keeps it between hosts (GlusterFS, CephFS, NFS), and it is no
 * file of its own that a crash could leave behind; it goes with the fd,
 * with the process, or with the client's connection.  Readers take no
 * lock: the name is never empty while it changes. */
#pragma once
#include <sys/stat.h>

#include "lower.h"

/* How long a step waits for another mount's hold on the same name, a
 * few lower round trips normally, before it fails with EBUSY. */
#define KVT_HOLD_PATIENCE_US (10 * G_USEC_PER_SEC)

/* Locks the record file at @d/@name and returns its fd, once the file
 * is still the one at the name with the lock held; @st gets its
 * metadata.  Closing the fd lets go.  -ENOENT when no file is at the
 * name, -EBADMSG when something else than a regular file is, -EBUSY when
 * another holder kept it KVT_HOLD_PATIENCE_US.
 *
 * With @aside, the record is opened through a link of its own made there
 * as @alias, which the caller removes after closing the fd.  For NFS: its
 * client renames a file open here that a rename replaces to ".nfs<hex>"
 * first, and between its two renames the name is missing for every other
 * host; a file open through another name is not. */
int kvt_hold_record(struct kvt_dir *d, const char *name, struct kvt_dir *aside,
		    const char *alias, struct stat *st);
