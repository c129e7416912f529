/*
 * kvtierfs-nullfs: the cheapest FUSE file system there is, for scripts/bench.
 * Every lookup answers ENOENT at once, with no negative entry, so each
 * access() on it is exactly one round trip through /dev/fuse and nothing
 * else: the reference for a first miss on kvtierfs, which costs one such
 * round trip.  It is run the way kvtierfs is, with the same loop:
 *
 *     kvtierfs-nullfs -f [-o hits] [-o ready_fd=N] ANYDIR MOUNTPOINT
 *
 * With -o hits every name is there instead: a directory, a new node each
 * lookup, kept by the kernel for a day.  The second access() of a name is
 * then served by the kernel's dentry cache alone: the reference for a
 * lookup hit on any FUSE file system, which costs what the kernel's FUSE
 * path walk costs.
 * ANYDIR is accepted and ignored, so that the benchmark mounts both alike.
 * Not installed.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool hits;
static uint64_t next_node = FUSE_ROOT_ID + 1;

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = {
		.attr = { .st_mode = S_IFDIR | 0755, .st_nlink = 2 },
		.attr_timeout = 86400,
		.entry_timeout = 86400,
	};

	(void)parent;
	(void)name;
	if (!hits) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Never reused, so forgets need no answer. */
	e.ino = __atomic_fetch_add(&next_node, 1, __ATOMIC_RELAXED);
	e.attr.st_ino = e.ino;
	fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st = { .st_ino = ino, .st_mode = S_IFDIR | 0755, .st_nlink = 2 };

	(void)fi;
	if (ino != FUSE_ROOT_ID && !hits) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_attr(req, &st, 1.0);
}

static const struct fuse_lowlevel_ops null_ops = {
	.lookup = null_lookup,
	.getattr = null_getattr,
};

static void usage(void)
{
	fprintf(stderr, "usage: kvtierfs-nullfs -f [-o hits] [-o ready_fd=N] ANYDIR MOUNTPOINT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char *fuse_argv[] = { argv[0], NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, fuse_argv);
	struct fuse_loop_config *loop;
	struct fuse_session *se;
	int opt, ready_fd = -1, ret;
	char *end;

	while ((opt = getopt(argc, argv, "fo:")) != -1) {
		if (opt == 'f')
			continue; /* always in the foreground */
		if (opt != 'o')
			usage();
		for (char *o = strtok(optarg, ","); o; o = strtok(NULL, ",")) {
			if (!strcmp(o, "hits")) {
				hits = true;
				continue;
			}
			if (strncmp(o, "ready_fd=", 9))
				usage();
			ready_fd = (int)strtol(o + 9, &end, 10);
			if (*end || end == o + 9 || ready_fd < 0)
				usage();
		}
	}
	if (argc - optind != 2)
		usage();

	se = fuse_session_new(&args, &null_ops, sizeof(null_ops), NULL);
	/* libfuse's parse may have copied the arguments: they are ours. */
	fuse_opt_free_args(&args);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, argv[optind + 1])) {
		fprintf(stderr, "kvtierfs-nullfs: cannot mount on %s\n", argv[optind + 1]);
		fuse_session_destroy(se);
		return 1;
	}
	if (ready_fd >= 0) {
		dprintf(ready_fd, "ready %d\n", getpid());
		close(ready_fd);
	}
	/* The loop kvtierfs runs (src/daemon/main.c): threads kept while idle. */
	loop = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(loop, 64);
	ret = fuse_session_loop_mt(se, loop);
	fuse_loop_cfg_destroy(loop);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return ret ? 1 : 0;
}
