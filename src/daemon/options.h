/* The daemon's command line: kvtierfs's own options, the two directories,
 * and the rest for libfuse. */
#pragma once
#include <fuse_opt.h>
#include <stdbool.h>

enum kvt_verify_mode {
	KVT_VERIFY_ONCE,	/* once a mount, again when the lower file changes */
	KVT_VERIFY_ALWAYS,	/* at every open for reading */
	KVT_VERIFY_AUTO,	/* always on a remote store, else once */
};

/* -o evict=: a policy of evict.h, or none. */
enum kvt_evict_choice {
	KVT_EVICT_CHOICE_ADAPTIVE,
	KVT_EVICT_CHOICE_S3FIFO,
	KVT_EVICT_CHOICE_SLRU,
	KVT_EVICT_CHOICE_LRU,
	KVT_EVICT_CHOICE_OFF,
};

struct kvt_options {
	/* switches */
	int foreground;		/* -f, also set by -d */
	int debug;		/* -d: FUSE request tracing */
	int version;		/* -V: print the version, mount nothing */
	int help;		/* -h: the help is printed, mount nothing */
	int allow_other;	/* seen on its way to libfuse */

	/* -o options of kvtierfs; counts are whole numbers below INT_MAX */
	int ready_fd;		/* -1: none */
	char *tmp_suffix;	/* "": no temp files */
	double entry_timeout;	/* seconds; < 0: by sharing (share.h) */
	double attr_timeout;
	double negative_timeout;
	int max_threads;
	int max_idle_threads;	/* -1: keep them all */
	int verify;		/* enum kvt_verify_mode */
	bool no_uring;		/* uring=0 */
	int max_inodes;
	int verify_cache;
	int copy_memory;	/* MiB; -1: by the machine's memory */
	int max_dir_fds;
	int max_pending;	/* stages per uid; -1: by the descriptor limit */
	int max_staged;		/* MiB staged per uid; -1: by the lower disk */
	int max_xattr_size;	/* bytes of client xattrs per file */
	int xattr_memory;	/* MiB of xattrs of files without a record */
	bool shared;		/* shared: the store counts as shared always */
	bool sync;		/* sync: publications durable at once */
	int reclaim;		/* lower entries a second; 0: off */
	double reclaim_interval;
	double max_size;	/* bytes of objects; 0: no budget */
	int min_free;		/* % of the lower file system kept free */
	int evict;		/* enum kvt_evict_choice */
	int evict_high;		/* % of the budget */
	int evict_low;
	int scrub;		/* MiB hashed a second; 0: off */
	double scrub_interval;
	int log_level;		/* enum kvt_log_level; -d: debug */
	char *log_file;		/* NULL: stderr, or the system log */

	char *lowerdir;
	char *mountpoint;
	/* For fuse_session_new(): subtype and fsname, every -o option that
	 * kvtierfs does not take, default_permissions with allow_other, and
	 * -d. */
	struct fuse_args fuse_args;
};

/*
 * Fills @o from the command line.  Returns 0 with @o ready to mount, or
 * with o->help (the help went to stdout) or o->version set; -1 after one
 * line on stderr that says what is wrong.  Call kvt_options_free() either
 * way.
 */
int kvt_options_parse(int argc, char **argv, struct kvt_options *o);
void kvt_options_free(struct kvt_options *o);

/* kvtierfs's options as they are in effect, "name=value,...", for the
 * mount's log line; g_free() it. */
char *kvt_options_describe(const struct kvt_options *o);
