/* Reclamation: a mounted store removes the objects that no record uses
 * (left by a crash, a power cut, a lost race), in passes that walk the
 * records and then sweep a range of objects/; the rule that makes it safe
 * with other mounts at work, and its proof, are at the top of reclaim.c.
 * Knows nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stddef.h>

struct kvt_store;

struct kvt_reclaim_opts {
	/* Lower entries a second: records read plus object links looked
	 * at; 0: as fast as it goes. */
	unsigned rate;
	/* Bound on the filter of the references records use (bytes): a
	 * store with more records than it holds at ten bits each is swept
	 * a range of fan-out directories per pass. */
	size_t filter_bytes;
	/* Seconds an anchor whose last reference went is left to the mount
	 * that removed that reference: its release removes the anchor a
	 * step later (kvt_object_release), and a pass between the two
	 * steps would do the work twice and count it as an orphan.  0: no
	 * wait (tests). */
	double anchor_grace;
	/* For tests: called after the walk has listed and read all of
	 * names/@rel ("" for names/ itself). */
	void (*after_dir)(const char *rel, void *data);
	void *data;
};

#define KVT_RECLAIM_FILTER_BYTES (8u << 20)
#define KVT_RECLAIM_ANCHOR_GRACE 10.0

struct kvt_reclaim_result {
	guint64 records;     /* records read under names/ */
	guint64 links;       /* links looked at under objects/ */
	guint64 reclaimed;   /* orphan links removed: references and anchors */
	guint64 bytes;       /* bytes of the objects whose last link went */
	guint stale_stages;  /* dead mounts' staging directories removed */
	guint stale_marks;   /* dead mounts' markers removed from moves/ */
	guint lo, hi;        /* fan-out directories of the sweep: [lo, hi) */
	const char *aborted; /* why nothing was swept, or NULL */
	bool again;          /* aborted, but a pass at once may do better */
	double secs;
};

struct kvt_reclaimer;

struct kvt_reclaimer *kvt_reclaimer_new(struct kvt_store *s,
					const struct kvt_reclaim_opts *o);
/* One pass, in the calling thread; counts and logs what it did (one line
 * when it removed something). */
void kvt_reclaimer_pass(struct kvt_reclaimer *r, struct kvt_reclaim_result *res);
/* Passes in a thread of its own, @interval seconds after the start and
 * after each one ends (at once after one that asks to go again, a second
 * at least after one that stopped early), but never sooner than nine
 * times what the pass took, so that passes take a tenth of the time;
 * while this mount is the one that reclaims the store (layout.h).  Until
 * then it looks again every @interval seconds (a second at least). */
void kvt_reclaimer_start(struct kvt_reclaimer *r, double interval);
/* Stops the thread (a pass in progress ends at its next entry) and
 * frees; NULL is a no-op. */
void kvt_reclaimer_free(struct kvt_reclaimer *r);
