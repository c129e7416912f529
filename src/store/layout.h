/* The layout of a store on LOWERDIR, known here once, for the daemon and
 * for the checker alike:
 *
 *   kvtierfs-store            format marker: "kvtierfs-store <version>\n"
 *   objects/<ab>/<hash>       anchor: one link per distinct content, for dedup
 *   objects/<ab>/<hash>.<ref> reference: one hard link per name record
 *   names/<visible path>      name records (record.h) and directories
 *   staging/<mount id>/       one mount's unpublished files, with "lock"
 *                             and "marks-moves"
 *   moves/<token>.<n>         a rename of published names in progress
 *
 * A mount holds an OFD write lock on its staging/<id>/lock for its
 * lifetime; the kernel (or the NFS server, at lease expiry) drops it when
 * the mount dies, so a staging directory whose lock can be taken belongs
 * to nobody.  No lock file outlives the lock's meaning.  A mount marks
 * every move of a record in moves/ for as long as it lasts, and says so
 * with staging/<id>/marks-moves, made before its lock is taken: the rule
 * by which a mounted store reclaims orphans rests on it (reclaim.c).
 * One mount of a store reclaims orphans at a time: the one that holds an
 * OFD write lock on one byte of the marker, past its end
 * (kvt_layout_lock_reclaimer): each pass reads every record, and on a
 * shared file system N hosts passing would cost its server N times the
 * reads for no more orphans found.  One mount evicts in the background
 * at a time too, by the byte after it (kvt_layout_lock_evictor).
 * moves/ came after format 1 was fixed: a store made before it gets it at
 * its next mount, and a store without it is read as one where no move is
 * in progress. */
#pragma once
#include <glib.h>
#include <stdbool.h>

#include "lower.h"

#define KVT_MARKER "kvtierfs-store"
/* Format 2: a record carries its name's owner and mode, and the lower
 * files are root's (record.h).  A store of format 1 is read as it is (its
 * records without owner lines show their lower file's), and upgraded by
 * the first mount that finds no other live mount on it (kvt_store_open):
 * a kvtierfs of format 1 would read a record of format 2 as torn. */
#define KVT_FORMAT_VERSION 2
#define KVT_FORMAT_OLDEST 1

struct kvt_layout {
	struct kvt_dir *root;    /* LOWERDIR */
	struct kvt_dir *objects;
	struct kvt_dir *names;
	struct kvt_dir *staging; /* staging/, every mount's */
	struct kvt_dir *moves;   /* moves/; NULL in a store made before it */
	int format;              /* the marker's format version */
	mode_t root_mode;        /* LOWERDIR's permission bits, as opened */
	mode_t root_closed_from; /* the bits it had when the open made it
				  * 0700 (0: it was closed): for the mount
				  * to log once it logs where it will */
};

#define KVT_MOVES "moves"
/* In a mount's staging directory: the mount marks its moves. */
#define KVT_MARKS_MOVES "marks-moves"

enum kvt_layout_open {
	KVT_LAYOUT_EXISTING, /* a store, or an error */
	KVT_LAYOUT_CREATE,   /* an empty directory becomes a store */
};

/* LOWERDIR is entered by its owner alone, root or the daemon's user: the
 * users of a mount reach the store through the mount only, where each
 * name's permissions are checked.  objects/ holds every user's bytes,
 * names/ the records that say whose a name is, and a lock on the marker
 * stops reclamation: none of them is any user's to read, write or lock.
 * A LOWERDIR owned by anyone else is refused (whatever its mode, its
 * owner can change it); one the others can enter is made 0700 when
 * opened as a store (kvt_layout_open), saying so in the log.  A new store
 * makes its areas 0700 (names/ excepted: its mode is the mount root's)
 * and its marker 0600. */

/* Opens the store at @lowerdir: its marker must say a format this
 * kvtierfs reads (KVT_FORMAT_OLDEST to KVT_FORMAT_VERSION), and its
 * three areas be directories (moves/ too, where it exists).  With
 * KVT_LAYOUT_CREATE an empty directory (lost+found allowed) is made into a
 * store first.  On failure @err says why in one line naming LOWERDIR. */
bool kvt_layout_open(const char *lowerdir, enum kvt_layout_open how,
		     struct kvt_layout *out, GError **err);
void kvt_layout_close(struct kvt_layout *l);
/* For the checker: as KVT_LAYOUT_EXISTING, LOWERDIR left as found (its
 * mode in @out->root_mode), but a store whose marker is
 * missing (*@marker -ENOENT) or not a marker (empty after a power cut,
 * garbage: -EBADMSG) opens too when its three areas are directories;
 * whether it is a store is then the caller's to judge.  A marker of
 * another format is refused as by a mount. */
bool kvt_layout_open_unmarked(const char *lowerdir, struct kvt_layout *out, int *marker,
			      GError **err);
/* LOWERDIR made 0700 (on the open directory, never by path) when others
 * could enter it: 1 made, 0 it was closed, -errno. */
int kvt_layout_close_root(struct kvt_layout *l);
/* Writes the marker of this format durably (a new file, fsync, rename,
 * fsync of LOWERDIR). */
int kvt_layout_write_marker(struct kvt_dir *root);

/* The format version that a marker's @len bytes state: exactly
 * "kvtierfs-store <version>" as create_store() writes it (%d of a
 * version >= 0), with its newline or without; -EBADMSG for anything
 * else.  Pure, so that tests/fuzz/ runs the daemon's own code. */
int kvt_marker_parse(const char *buf, size_t len, int *version);

/* Whether a live mount holds staging/@name's lock: 1 yes, 0 no, -errno.
 * Asks without taking (F_OFD_GETLK), so it works on a read-only store. */
int kvt_staging_live(struct kvt_layout *l, const char *name);
/* Removes staging/@name and all it holds, unless a live mount holds its
 * lock (-EBUSY): the lock is taken first (its file made if missing) and
 * its file goes last, so that a mount that came to life meanwhile keeps
 * its files, and one being born there fails to lock and starts over.
 * Files only, one level of directories (a staging directory is flat);
 * nothing is followed. */
int kvt_staging_remove(struct kvt_layout *l, const char *name);
/* Takes the lock of a staging directory: -EAGAIN if a live mount holds
 * it.  The fd holds the lock; close it to let go. */
int kvt_staging_lock(struct kvt_dir *stage, bool create);
/* Takes the reclaimer's lock (above): -EAGAIN if another live mount holds
 * it.  The fd holds the lock; close it to let go. */
int kvt_layout_lock_reclaimer(struct kvt_layout *l);
/* The same for the evictor's passes past the high watermark (evictor.h):
 * the byte after the reclaimer's. */
int kvt_layout_lock_evictor(struct kvt_layout *l);

/* A store-wide job one mount does at a time (reclaim, eviction past the
 * high watermark): the lock that says which, and what the log says when
 * another mount has it and when this one takes over. */
struct kvt_lead_job {
	int (*lock)(struct kvt_layout *l);
	const char *lock_name;  /* "reclaimer's lock" */
	const char *other;
	const char *now;
};
/* One mount's look at who does a job: its lock once taken, or -1. */
struct kvt_lead {
	const struct kvt_lead_job *job;
	int fd;
	bool deferring;         /* another mount had it at the last look */
};
#define KVT_LEAD_INIT(j) ((struct kvt_lead){ .job = (j), .fd = -1 })
/* Whether this mount does @lead's job: it takes the lock if it can,
 * and keeps it until kvt_lead_release; false while another live mount
 * holds it.  Where there is no lock to take (no byte-range locks, or
 * a marker that cannot be written), true: each mount does the job, which
 * is safe, only dearer.  Logs a change of hands once. */
bool kvt_lead_take(struct kvt_layout *l, struct kvt_lead *lead);
void kvt_lead_release(struct kvt_lead *lead);
/* "a FIFO", "a symbolic link"...: what is at @d/@name instead of what the
 * layout wants there. */
const char *kvt_layout_what_is(struct kvt_dir *d, const char *name);
