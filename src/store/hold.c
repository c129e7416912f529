/* Holds the record at a name across mounts, where the lower file system
 * has no RENAME_EXCHANGE: the record file locked (flock, with a deadline)
 * and checked to be still at the name, so that a step that replaces it
 * knows exactly which record it replaced (hold.h). */
#include "hold.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "log.h"

/* flock with a deadline: a blocking flock could wait forever on a holder
 * whose host stopped answering (invariant 9). */
static int lock_until(int fd, const char *name, gint64 until)
{
	gulong pause = 100;
	int ret;

	while ((ret = kvt_file_lock(fd, name)) < 0) {
		if (ret == -EINTR)
			continue;
		if (ret != -EWOULDBLOCK)
			return ret;
		if (g_get_monotonic_time() >= until)
			return -EBUSY;
		g_usleep(pause);
		pause = MIN(pause * 2, 20000);
	}
	return 0;
}

/* ESTALEs a hold looks again after: a few, for a name other hosts keep
 * changing; one that stays (a directory gone under its handle) is the
 * caller's to handle. */
#define HOLD_STALE_TRIES 8

/* The file at @d/@name opened (through @aside/@alias, a link made of
 * it, when @aside is given). */
static int open_held(struct kvt_dir *d, const char *name, struct kvt_dir *aside,
		     const char *alias, int flags, struct stat *st)
{
	int ret;

	if (!aside)
		return kvt_dir_open_file(d, name, flags, 0, st);
	ret = kvt_dir_link(d, name, aside, alias);
	if (ret < 0)
		/* EPERM: a directory, which no link takes. */
		return ret == -EPERM ? -EBADMSG : ret;
	ret = kvt_dir_open_file(aside, alias, flags, 0, st);
	if (ret < 0)
		kvt_dir_unlink(aside, alias);
	return ret;
}

/* Lets go of what open_held opened. */
static void close_held(int fd, struct kvt_dir *aside, const char *alias)
{
	close(fd);
	if (aside)
		kvt_dir_unlink(aside, alias);
}

int kvt_hold_record(struct kvt_dir *d, const char *name, struct kvt_dir *aside,
		    const char *alias, struct stat *st)
{
	gint64 until = g_get_monotonic_time() + KVT_HOLD_PATIENCE_US;
	int stale = 0;

	for (;;) {
		struct stat now;
		int fd = open_held(d, name, aside, alias, O_RDONLY, st);
		int ret;

		/* ESTALE: another mount changed the name as we looked at it
		 * (the door tried again already): look again. */
		if (fd == -ESTALE && stale++ < HOLD_STALE_TRIES)
			continue;
		if (fd < 0)
			return fd;
		ret = lock_until(fd, name, until);
		if (ret == -EBADF) {
			/* NFS makes flock a lock of the whole file, which
			 * wants a file opened for writing to be exclusive. */
			close_held(fd, aside, alias);
			fd = open_held(d, name, aside, alias, O_RDWR, st);
			if (fd < 0)
				return fd;
			ret = lock_until(fd, name, until);
		}
		if (ret == 0)
			ret = kvt_dir_stat(d, name, &now);
		if (ret == 0 && now.st_ino == st->st_ino && now.st_dev == st->st_dev)
			return fd;
		close_held(fd, aside, alias);
		if (ret == -EBUSY)
			g_warning("the record of %s was held by another mount for %d s", name,
				  (int)(KVT_HOLD_PATIENCE_US / G_USEC_PER_SEC));
		/* 0, or ESTALE at the stat: another mount changed the name
		 * while we waited: the record there now is the one to hold. */
		if (ret == -ESTALE && stale++ < HOLD_STALE_TRIES)
			continue;
		if (ret < 0)
			return ret;
	}
}
