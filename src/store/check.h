/* The store checker behind kvtierfs-fsck: walks an unmounted store, reports
 * every problem as one path relative to LOWERDIR, and on request removes
 * what is torn or orphaned.  Knows nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdbool.h>

enum kvt_problem {
	KVT_TORN_HASH,     /* object bytes differ from the hash in its name, or
			    * a record whose object does */
	KVT_TORN_SIZE,     /* record whose object has another size */
	KVT_DANGLING,      /* record whose reference link is missing */
	KVT_UNPARSABLE,    /* file in names/ that is not a record */
	KVT_ORPHAN,        /* reference or anchor that no record uses */
	KVT_SHARED_REF,    /* record using a reference another record uses */
	KVT_STALE_STAGING, /* staging directory, or moves/ marker, of a dead mount */
	KVT_UNKNOWN,       /* anything kvtierfs does not create */
	KVT_LOST_MARKER,   /* the store's marker is missing, empty or garbage
			    * (a power cut before it was synced) */
	KVT_OPEN_LOWERDIR, /* LOWERDIR lets others in (layout.h): made 0700 */
};

/* The keyword printed for @kind ("torn-hash", "orphan", ...). */
const char *kvt_problem_name(enum kvt_problem kind);

struct kvt_problem_report {
	enum kvt_problem kind;
	const char *path;    /* relative to LOWERDIR */
	const char *detail;  /* one line, no trailing newline */
	bool repairable;     /* --repair removes it */
	int repair;          /* 1 removed, 0 not attempted, -errno failed */
};

struct kvt_check_opts {
	bool repair;
	/* One call per problem, in walk order. */
	void (*problem)(const struct kvt_problem_report *p, void *data);
	/* One line per operational error met while walking (an unreadable
	 * directory, a read error): the check goes on but is incomplete. */
	void (*error)(const char *msg, void *data);
	void *data;
};

struct kvt_check_result {
	guint64 names;    /* regular files under names/ */
	guint64 objects;  /* distinct object inodes under objects/ */
	guint64 problems;
	guint64 repaired;
	guint64 errors;   /* operational errors: the result is incomplete */
};

#define KVT_CHECK_ERROR (kvt_check_error_quark())
GQuark kvt_check_error_quark(void);

enum {
	KVT_CHECK_ERROR_STORE, /* missing, unreadable, not a store, other format */
	KVT_CHECK_ERROR_BUSY,  /* a live mount holds a staging lock */
};

/* Checks the store at @lowerdir.  Returns false with @err set (one line)
 * when the check could not start: no store there (a lost marker is a
 * problem, repaired by writing it again, only where the rest is clearly a
 * store: its three areas, objects/ holding only fan-out directories, and
 * a record among the first files of names/ when it has any); true otherwise, with the counts in @res
 * (res->errors > 0 when walking failed somewhere).  Orphans are only looked
 * for, and only removed, when every record could be read. */
bool kvt_check(const char *lowerdir, const struct kvt_check_opts *opts,
	       struct kvt_check_result *res, GError **err);
