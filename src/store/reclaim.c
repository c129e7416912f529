/* Reclamation of orphans by a mounted store (reclaim.h).
 *
 * An orphan is a reference objects/<ab>/<hash>.<ref> that no record under
 * names/ names, or an anchor objects/<ab>/<hash> whose inode has no other
 * link.  A crash or a power cut leaves them between the steps of a
 * publication or of a release (publish.c): an object whose record never
 * landed, the object of a replaced record; where the file system has no
 * renameat2 flags at all (some NFS servers), a client's rename that loses
 * a race leaves one too (name.c).  An anchor alone is easy: its link count
 * is 1, so no reference shares its inode, and a publication that links to
 * it meanwhile holds its own reference (as in kvt_object_release).  A
 * reference is not: to know that no record names it every record must be
 * read, a store holds millions, and other mounts, on other hosts, publish,
 * rename and remove meanwhile, sharing nothing with us but LOWERDIR.
 *
 * The rule.  A pass
 *   1. takes the file system's time X: the change time of a file it
 *      touches in its own staging directory;
 *   2. then lists the live mounts, the staging directories whose lock is
 *      held (layout.h); each must say that it marks its moves
 *      (staging/<id>/marks-moves), or the pass stops;
 *   3. reads every record under names/ and puts the references of those in
 *      its range of fan-out directories into a Bloom filter;
 *   4. then checks that moves/ holds no marker, and after that, that its
 *      modification time is before X;
 *   5. then, in its range (after checking that the time has not gone
 *      back), removes every reference that
 *        a. is not in the filter,
 *        b. was made by a mount that was not live in 2 (a reference id
 *           starts with its mount's token: kvt_store_new_ref),
 *        c. has a change time before X, read through an open of its own,
 *      and every anchor whose link count is 1 (then) and whose change
 *      time is a grace (anchor_grace) before X, or whose reference the
 *      pass removed (one whose last reference another mount removed
 *      lately is being released by that mount, a step away).
 * A move is any step that makes a record naming an existing reference
 * appear at a place of names/ it was not at: kvt_name_rename (a name, a
 * directory of them, RENAME_EXCHANGE), kvt_store_rewrite (a new record
 * file for the same object), the record a purge puts back.  Every mount
 * creates a marker moves/<token>.<n> before a move and removes it after
 * (kvt_store_move_begin/end); a mount's first and only other steps with a
 * reference are its own publications.
 *
 * Why no record names a reference R that a pass removes.  Let M be the
 * mount that made R.
 *   - By c, R was made before X, so before 2.  M took its lock before it
 *     made any reference (kvt_store_open) and holds it until it dies; it
 *     was not live in 2, so it died before the walk of 3 began and
 *     installs no record again.  (A mount born after 2 makes references
 *     after X, which c leaves alone.)
 *   - Any other record naming R appears by a move.  A move whose rename
 *     fell within 3 (after X) still has its marker at 4, or has removed
 *     it, which set the modification time of moves/ to after X: either way
 *     4 stops the pass.  So during 3 no record naming R appeared anywhere:
 *     each one that existed stayed at its name until it was removed.
 *   - readdir returns every entry present for the whole listing: a record
 *     that stayed at its name was listed, read, and R went into the
 *     filter; one removed first names R no more.  So R not in the filter
 *     means no record named R when 3 ended, and none can appear after:
 *     no mount installs R (first point) and a move needs a record to move.
 *   - The filter may answer "in" for a reference no record names (then an
 *     orphan waits for a later pass, with another seed), never "out" for
 *     one it holds.
 *   - A record that does not parse names nothing (resolve purges it as
 *     torn); one that cannot be read stops the pass.
 * What it rests on: link and unlink set the change time of the inode;
 * the file system's clock does not go back (a pass that sees it go back
 * stops); a lock dies with its mount, and only then (a removal of dead
 * staging never takes the lock file of a mount being born:
 * kvt_staging_remove), and a dead mount sends nothing more (NFS: at lease
 * expiry); readdir as above; every mount of the store marks
 * its moves (a live one that does not say so stops every pass: an older
 * kvtierfs).  Orphans of a live mount (its failed rollback) wait until it
 * is gone.  What no other mount can see is not protected: the object of a
 * file renamed over, which a mount keeps in memory for a process that
 * looked the name up before the rename (release_on_free, namespace.c), is
 * an orphan to the store, and a pass that began after the rename may take
 * it; that process's open then fails (ENOENT, as if the rename had come
 * first), it never reads other bytes.
 *
 * Cost and bounds.  Work is paced to @rate lower entries a second: a
 * record read (open, fstat, read, close, with O_NOATIME where allowed: its
 * times are the visible file's, which evictors read) or an object link
 * looked at (one listing entry; a stat for an anchor, an open for a
 * reference no record named).  Memory: the filter (ten bits a record, at most filter_bytes: a
 * store with more records is swept a range of fan-out directories per
 * pass, its size learnt from the pass before), one listing per level of
 * names/ being walked, as the daemon's readdir takes, and one fan-out
 * directory's.  Open files: one per level (at most MAX_DEPTH). */
#include "reclaim.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "name.h"
#include "object.h"
#include "store-int.h"
#include "usage.h"

#define MAX_DEPTH 256
#define BITS_PER_REF 10
#define FILTER_HASHES 7
#define FILTER_MIN_BITS (1u << 20)
#define CLOCK_FILE "clock"
/* A pass takes at most this share of the time: on a network file system
 * a record read is a dozen round trips, and a pass over a large store
 * would otherwise run back to back with the next, all the time, a load
 * on the server for orphans that are rare. */
#define DUTY_SHARE 10

/* Why a pass swept nothing; the first ones hold until a mount changes. */
static const char WHY_OLD_MOUNT[] = "a mount that does not mark its moves (an older kvtierfs) uses the store";
static const char WHY_DEEP[] = "names/ is nested deeper than 256 directories";
static const char WHY_STOPPED[] = "stopped";

/* ------------------------------------------------------------ filter */

struct filter {
	guint64 *bits;
	guint64 nbits;
	guint64 seed;
	guint64 added;
};

static void filter_spots(const struct filter *f, const kvt_hash *h, const char *ref,
			 guint64 *a, guint64 *b)
{
	char key[sizeof(h->b) + KVT_REF_MAX];
	size_t n = strnlen(ref, KVT_REF_MAX - 1);
	XXH128_hash_t x;

	memcpy(key, h->b, sizeof(h->b));
	memcpy(key + sizeof(h->b), ref, n);
	x = XXH3_128bits_withSeed(key, sizeof(h->b) + n, f->seed);
	*a = x.low64;
	*b = x.high64 | 1;
}

static void filter_add(struct filter *f, const kvt_hash *h, const char *ref)
{
	guint64 a, b;

	filter_spots(f, h, ref, &a, &b);
	for (guint i = 0; i < FILTER_HASHES; i++, a += b)
		f->bits[(a % f->nbits) / 64] |= 1ull << (a % f->nbits % 64);
	f->added++;
}

static bool filter_has(const struct filter *f, const kvt_hash *h, const char *ref)
{
	guint64 a, b;

	filter_spots(f, h, ref, &a, &b);
	for (guint i = 0; i < FILTER_HASHES; i++, a += b)
		if (!(f->bits[(a % f->nbits) / 64] & 1ull << (a % f->nbits % 64)))
			return false;
	return true;
}

/* ------------------------------------------------------------ reclaimer */

struct kvt_reclaimer {
	struct kvt_store *s;
	struct kvt_reclaim_opts o;
	guint64 estimate;   /* records the last walk read */
	guint part;         /* the next range of fan-out directories */
	guint64 seed;
	bool warned;        /* about a reason that holds */
	/* pacing, within a pass */
	gint64 t0;
	guint64 work;
	/* the thread */
	GMutex lock;
	GCond cond;
	gint stop;
	GThread *thread;
	double interval;
	struct kvt_lead lead; /* the reclaimer's lock (layout.h) */
};

/* Counts @n units of work and waits as long as the rate asks; false when
 * the reclaimer is stopping. */
static bool pace(struct kvt_reclaimer *r, guint n)
{
	gint64 due;
	bool stop;

	r->work += n;
	if (!r->o.rate)
		return !g_atomic_int_get(&r->stop);
	due = r->t0 + (gint64)(r->work * G_USEC_PER_SEC / r->o.rate);
	if (g_get_monotonic_time() >= due)
		return !g_atomic_int_get(&r->stop);
	g_mutex_lock(&r->lock);
	while (!r->stop && g_get_monotonic_time() < due)
		g_cond_wait_until(&r->cond, &r->lock, due);
	stop = r->stop;
	g_mutex_unlock(&r->lock);
	return !stop;
}

/* ------------------------------------------------------------ a pass */

struct pass {
	struct kvt_reclaimer *r;
	struct kvt_store *s;
	struct kvt_reclaim_result *res;
	struct timespec x;  /* the file system's time at the start */
	struct timespec settled; /* X less the anchor grace */
	GHashTable *live;   /* tokens of the mounts live after X */
	struct filter f;
};

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static struct timespec ts_minus(const struct timespec *t, double secs)
{
	gint64 ns = (gint64)t->tv_sec * 1000000000 + t->tv_nsec - (gint64)(secs * 1e9);

	return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

/* The file system's clock (the server's, on NFS), as it stamps inodes. */
static int fs_now(struct kvt_store *s, struct timespec *now)
{
	struct stat st;
	kvt_autofd fd = kvt_dir_open_file(s->stage, CLOCK_FILE, O_WRONLY | O_CREAT, 0600, NULL);
	int ret;

	if (fd < 0)
		return fd;
	ret = kvt_file_setattr(fd, CLOCK_FILE, KVT_SET_TIMES, 0, 0, 0, NULL);
	if (ret == 0)
		ret = kvt_file_stat(fd, CLOCK_FILE, &st);
	if (ret < 0)
		return ret;
	*now = st.st_ctim;
	return 0;
}

/* The token of a staging directory (the end of the mount id), of a
 * reference id or of a marker (their start). */
static const char *stage_token(const char *name)
{
	size_t n = strlen(name);

	return n > KVT_TOKEN_LEN ? name + n - KVT_TOKEN_LEN : name;
}

static void lead_token(const char *name, char out[KVT_TOKEN_LEN + 1])
{
	size_t n = strcspn(name, ".");

	g_strlcpy(out, name, MIN(n, KVT_TOKEN_LEN) + 1);
}

/* Whether the live mount with staging directory @name marks its moves:
 * 0 yes, -ENOENT no, else -errno. */
static int marks_moves(struct kvt_layout *l, const char *name)
{
	g_autoptr(kvt_dir) stage = NULL;
	struct stat st;
	int ret = kvt_dir_open(l->staging, name, &stage);

	return ret < 0 ? ret : kvt_dir_stat(stage, KVT_MARKS_MOVES, &st);
}

/* Puts the tokens of the live mounts into @live; with @remove_dead
 * removes the staging of dead ones (their staged files hold links to
 * objects). */
static const char *scan_staging(struct pass *p, GHashTable *live, bool remove_dead)
{
	struct kvt_layout *l = &p->s->layout;
	int ret;
	g_autoptr(GPtrArray) ents = kvt_dir_list(l->staging, false, &ret);

	if (!ents)
		return "staging/ cannot be listed";
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];
		int alive = kvt_staging_live(l, e->name);

		if (alive == -ENOTDIR || alive == -ELOOP)
			continue; /* not a mount's (fsck reports it) */
		if (alive < 0)
			return "a mount's lock cannot be read";
		if (!alive) {
			if (remove_dead && kvt_staging_remove(l, e->name) == 0)
				p->res->stale_stages++;
			continue;
		}
		ret = marks_moves(l, e->name);
		/* Gone meanwhile: dead, not old. */
		if (ret == -ENOENT && kvt_staging_live(l, e->name) == 1)
			return WHY_OLD_MOUNT;
		if (ret < 0 && ret != -ENOENT)
			return "a mount's staging cannot be read";
		g_hash_table_add(live, g_strdup(stage_token(e->name)));
	}
	return NULL;
}

/* Before X: the staging and the markers of dead mounts.  A marker is
 * listed before the mounts are: its mount locked before it made it, so
 * one not live after it was listed is dead and never touches it again. */
static const char *clean_dead(struct pass *p)
{
	g_autoptr(GHashTable) live = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	g_autoptr(GPtrArray) marks = NULL;
	const char *why;
	int ret;

	marks = kvt_dir_list(p->s->layout.moves, false, &ret);
	if (!marks)
		return "moves/ cannot be listed";
	why = scan_staging(p, live, true);
	for (guint i = 0; !why && i < marks->len; i++) {
		const struct kvt_dirent *e = marks->pdata[i];
		char tok[KVT_TOKEN_LEN + 1];

		lead_token(e->name, tok);
		if (!g_hash_table_contains(live, tok) &&
		    kvt_dir_unlink(p->s->layout.moves, e->name) == 0)
			p->res->stale_marks++;
	}
	return why;
}

/* ------------------------------------------------------------ walk */

struct frame {
	struct kvt_dir *d;
	GPtrArray *ents;
	guint next;
	char *rel;
};

static void frame_clear(gpointer data)
{
	struct frame *f = data;

	kvt_dir_unref(f->d);
	if (f->ents)
		g_ptr_array_unref(f->ents);
	g_free(f->rel);
}

/* Lists @d (names/@rel; both taken) onto the walk's stack. */
static const char *push_dir(GArray *stack, struct kvt_dir *d, char *rel)
{
	struct frame f = { .d = d, .rel = rel };
	int ret;

	f.ents = kvt_dir_list(d, false, &ret);
	if (!f.ents) {
		frame_clear(&f);
		/* Removed since it was opened (an evictor's rmdir). */
		return ret == -ENOENT ? NULL : "a directory under names/ cannot be listed";
	}
	g_array_append_val(stack, f);
	return NULL;
}

static bool in_range(const struct kvt_reclaim_result *res, const kvt_hash *h)
{
	return h->b[0] >= res->lo && h->b[0] < res->hi;
}

/* One entry of the directory on top of the stack. */
static const char *walk_entry(struct pass *p, GArray *stack, const struct kvt_dirent *e)
{
	struct frame *f = &g_array_index(stack, struct frame, stack->len - 1);
	mode_t type = DTTOIF(e->type);
	struct kvt_record rec;
	struct stat st;
	int ret;

	if (e->type == DT_UNKNOWN) {
		ret = kvt_dir_stat(f->d, e->name, &st);
		if (ret == -ENOENT)
			return NULL;
		if (ret < 0)
			return "an entry under names/ cannot be looked at";
		type = st.st_mode & S_IFMT;
	}
	if (S_ISDIR(type)) {
		struct kvt_dir *sub = NULL;

		if (stack->len >= MAX_DEPTH)
			return WHY_DEEP;
		ret = kvt_dir_open(f->d, e->name, &sub);
		/* Removed meanwhile (a move stops the pass at 4). */
		if (ret == -ENOENT || ret == -ENOTDIR || ret == -ELOOP)
			return NULL;
		if (ret < 0)
			return "a directory under names/ cannot be opened";
		return push_dir(stack, sub, f->rel[0] ? g_strdup_printf("%s/%s", f->rel, e->name)
						     : g_strdup(e->name));
	}
	if (!S_ISREG(type))
		return NULL;
	ret = kvt_name_peek(f->d, e->name, &rec);
	if (ret == -ENOENT || ret == -EBADMSG)
		return NULL; /* removed, or names nothing */
	if (ret < 0)
		return "a record cannot be read";
	p->res->records++;
	/* A symbolic link or a special file has no object. */
	if (rec.kind == KVT_KIND_FILE && rec.ref[0] && in_range(p->res, &rec.hash))
		filter_add(&p->f, &rec.hash, rec.ref);
	kvt_record_clear(&rec);
	return NULL;
}

static const char *walk_names(struct pass *p)
{
	g_autoptr(GArray) stack = g_array_new(FALSE, FALSE, sizeof(struct frame));
	const char *why;

	g_array_set_clear_func(stack, frame_clear);
	why = push_dir(stack, kvt_dir_ref(p->s->layout.names), g_strdup(""));
	while (!why && stack->len) {
		struct frame *f = &g_array_index(stack, struct frame, stack->len - 1);

		if (f->next == f->ents->len) {
			if (p->r->o.after_dir)
				p->r->o.after_dir(f->rel, p->r->o.data);
			g_array_set_size(stack, stack->len - 1);
			continue;
		}
		if (!pace(p->r, 1))
			return WHY_STOPPED;
		why = walk_entry(p, stack, f->ents->pdata[f->next++]);
	}
	return why;
}

/* ------------------------------------------------------------ checks */

/* Step 4: the markers first, then the time, so that a move that ended
 * between the two has set the time.  moves/ is opened again: fresh
 * attributes, also on NFS. */
static const char *moves_quiet(struct pass *p)
{
	g_autoptr(kvt_dir) moves = NULL;
	g_autoptr(GPtrArray) marks = NULL;
	struct stat st;
	int ret = kvt_dir_open(p->s->layout.root, KVT_MOVES, &moves);

	if (ret < 0)
		return "moves/ cannot be opened";
	marks = kvt_dir_list(moves, false, &ret);
	if (!marks)
		return "moves/ cannot be listed";
	if (marks->len)
		return "names were being renamed";
	if (kvt_dir_stat(moves, NULL, &st) < 0)
		return "moves/ cannot be looked at";
	if (!ts_before(&st.st_mtim, &p->x))
		return "names were renamed during the walk";
	return NULL;
}

/* The file system's time has not gone back since X. */
static const char *clock_forward(struct pass *p)
{
	struct timespec now;

	if (fs_now(p->s, &now) < 0)
		return "the file system's time cannot be read";
	return ts_before(&now, &p->x) ? "the file system's time went back" : NULL;
}

/* ------------------------------------------------------------ sweep */

/* @ours: this pass removed a reference of its inode. */
static void reclaim_anchor(struct pass *p, struct kvt_dir *fan, const char *name, bool ours)
{
	struct stat st;

	/* Its inode's last link: no reference shares it.  A publication
	 * that links to it meanwhile holds its own reference.  One whose
	 * last reference another mount removed lately (within the grace
	 * before X, or after X) is that mount's to remove, a step away
	 * (kvt_object_release): left to it. */
	if (kvt_dir_stat(fan, name, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    (!ours && !ts_before(&st.st_ctim, &p->settled)))
		return;
	if (kvt_dir_unlink(fan, name) < 0)
		return;
	p->res->reclaimed++;
	p->res->bytes += st.st_size;
	kvt_usage_move(p->s, kvt_usage_fan_of(name), -(int64_t)st.st_size);
}

/* Rule 5 for one link of @fan (objects/@dir); anchors whose inode lost a
 * reference go into @again, to be looked at once the directory is done. */
static void sweep_link(struct pass *p, struct kvt_dir *fan, const char *dir,
		       const char *name, GHashTable *again)
{
	const char *ref = name + KVT_HASH_HEX_LEN + 1;
	char tok[KVT_TOKEN_LEN + 1];
	struct stat st;
	kvt_autofd fd = -1;
	bool is_ref;
	kvt_hash h;

	if (!kvt_object_parse_name(dir, name, &h, &is_ref))
		return;
	if (!is_ref) {
		reclaim_anchor(p, fan, name, false);
		return;
	}
	lead_token(ref, tok);
	if (filter_has(&p->f, &h, ref) || g_hash_table_contains(p->live, tok))
		return;
	/* An open of its own: its attributes as they are now (NFS
	 * revalidates at open). */
	fd = kvt_dir_open_file(fan, name, O_RDONLY, 0, &st);
	if (fd < 0 || !ts_before(&st.st_ctim, &p->x))
		return;
	if (kvt_dir_unlink(fan, name) < 0)
		return;
	p->res->reclaimed++;
	if (st.st_nlink == 1) {
		p->res->bytes += st.st_size;
		kvt_usage_move(p->s, kvt_usage_fan_of(name), -(int64_t)st.st_size);
	} else
		g_hash_table_add(again, kvt_object_anchor_name(&h));
}

static const char *sweep_fanout(struct pass *p, guint b)
{
	g_autoptr(kvt_dir) fan = NULL;
	g_autoptr(GPtrArray) ents = NULL;
	g_autoptr(GHashTable) again = NULL;
	GHashTableIter it;
	gpointer anchor;
	const char *why;
	char dir[3];
	int ret;

	g_snprintf(dir, sizeof(dir), "%02x", b);
	ret = kvt_dir_open(p->s->layout.objects, dir, &fan);
	if (ret < 0)
		return ret == -ENOENT ? NULL : "a fan-out directory cannot be opened";
	ents = kvt_dir_list(fan, false, &ret);
	if (!ents)
		return "a fan-out directory cannot be listed";
	why = clock_forward(p);
	if (why)
		return why;
	again = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];

		if (!pace(p->r, 1))
			return WHY_STOPPED;
		p->res->links++;
		sweep_link(p, fan, dir, e->name, again);
	}
	g_hash_table_iter_init(&it, again);
	while (g_hash_table_iter_next(&it, &anchor, NULL))
		reclaim_anchor(p, fan, anchor, true);
	return NULL;
}

/* ------------------------------------------------------------ pass */

/* The range of fan-out directories and the filter for this pass, from the
 * number of records the last walk read. */
static void plan(struct pass *p)
{
	struct kvt_reclaimer *r = p->r;
	guint64 max_bits = MAX(r->o.filter_bytes, 8u) * 8;
	guint64 need = r->estimate * BITS_PER_REF;
	guint64 parts = CLAMP((need + max_bits - 1) / max_bits, 1, 256);
	guint part = r->part % parts;
	guint64 bits;

	p->res->lo = 256 * part / parts;
	p->res->hi = 256 * (part + 1) / parts;
	/* Room for a quarter more records than last time. */
	bits = need * (p->res->hi - p->res->lo) / 256 * 5 / 4;
	bits = CLAMP(bits, MIN(FILTER_MIN_BITS, max_bits), max_bits);
	p->f.nbits = (bits + 63) / 64 * 64;
	p->f.bits = g_new0(guint64, p->f.nbits / 64);
	p->f.seed = r->seed++;
}

static const char *run_pass(struct pass *p)
{
	const char *why = clean_dead(p);

	if (why)
		return why;
	if (fs_now(p->s, &p->x) < 0)
		return "the file system's time cannot be read";
	/* The staging of a dead mount removed just now changed the ctime
	 * of the objects its files linked, maybe within X's tick of the
	 * file system's clock: X is taken on a later tick, so that this
	 * pass, not the next, reclaims those it alone held. */
	for (int tick = 0; p->res->stale_stages && tick < 100; tick++) {
		struct timespec later;

		g_usleep(1000);
		if (fs_now(p->s, &later) < 0)
			return "the file system's time cannot be read";
		if (ts_before(&p->x, &later)) {
			p->x = later;
			break;
		}
	}
	p->settled = ts_minus(&p->x, p->r->o.anchor_grace);
	p->live = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	why = scan_staging(p, p->live, false);
	if (why)
		return why;
	plan(p);
	why = walk_names(p);
	if (why)
		return why;
	p->r->estimate = p->res->records;
	/* Past twice its size the filter answers "in" to most: the next
	 * pass, sized for these records, does better at once. */
	if (p->f.added > p->f.nbits / BITS_PER_REF * 2) {
		p->res->again = true;
		return "more records than the filter was sized for";
	}
	why = moves_quiet(p);
	/* The markers of dead mounts it removed may have set the time of
	 * moves/ to X's tick: a pass at once does not meet them again. */
	if (why && p->res->stale_marks)
		p->res->again = true;
	if (!why)
		why = clock_forward(p);
	for (guint b = p->res->lo; !why && b < p->res->hi; b++)
		why = sweep_fanout(p, b);
	if (!why)
		p->r->part++;
	return why;
}

static void report(struct kvt_reclaimer *r, const struct kvt_reclaim_result *res)
{
	struct kvt_store *s = r->s;

	kvt_store_count(s, KVT_STAT_orphans_reclaimed, res->reclaimed);
	kvt_store_count(s, KVT_STAT_orphan_bytes_reclaimed, res->bytes);
	kvt_store_count(s, res->aborted ? KVT_STAT_reclaim_aborted : KVT_STAT_reclaim_passes, 1);
	if (res->stale_stages)
		g_message("removed staging left by %u dead mount(s)", res->stale_stages);
	if (res->reclaimed)
		g_message("reclaimed %" G_GUINT64_FORMAT " orphan object link(s), %"
			  G_GUINT64_FORMAT " bytes, in objects/%02x-%02x (%" G_GUINT64_FORMAT
			  " records read, %" G_GUINT64_FORMAT " links looked at, %.2f s)",
			  res->reclaimed, res->bytes, res->lo, res->hi - 1, res->records,
			  res->links, res->secs);
	if ((res->aborted == WHY_OLD_MOUNT || res->aborted == WHY_DEEP) && !r->warned) {
		g_warning("reclamation of orphans waits: %s", res->aborted);
		r->warned = true;
	} else if (res->aborted) {
		g_debug("reclamation pass stopped: %s", res->aborted);
	}
	if (!res->aborted)
		r->warned = false;
}

void kvt_reclaimer_pass(struct kvt_reclaimer *r, struct kvt_reclaim_result *res)
{
	struct pass p = { .r = r, .s = r->s, .res = res };

	memset(res, 0, sizeof(*res));
	r->t0 = g_get_monotonic_time();
	r->work = 0;
	res->aborted = run_pass(&p);
	res->secs = (g_get_monotonic_time() - r->t0) / 1e6;
	if (p.live)
		g_hash_table_unref(p.live);
	g_free(p.f.bits);
	report(r, res);
}

static const struct kvt_lead_job reclaimer_job = {
	.lock = kvt_layout_lock_reclaimer,
	.lock_name = "reclaimer's lock",
	.other = "another mount reclaims the orphans of this store; this one takes over "
		 "when it is gone",
	.now = "this mount now reclaims the orphans of this store",
};

struct kvt_reclaimer *kvt_reclaimer_new(struct kvt_store *s, const struct kvt_reclaim_opts *o)
{
	struct kvt_reclaimer *r = g_new0(struct kvt_reclaimer, 1);

	r->s = s;
	r->o = *o;
	if (!r->o.filter_bytes)
		r->o.filter_bytes = KVT_RECLAIM_FILTER_BYTES;
	/* Mounts sweeping side by side use other seeds, and so do passes. */
	r->seed = (guint64)g_random_int() << 32 | g_random_int();
	r->lead = KVT_LEAD_INIT(&reclaimer_job);
	g_mutex_init(&r->lock);
	g_cond_init(&r->cond);
	return r;
}

/* Whether this mount is the one that reclaims the store (layout.h): it
 * holds the lock from its first pass on; the others look for it again
 * before each of theirs, and take over when its mount is gone. */
static bool lead(struct kvt_reclaimer *r)
{
	if (kvt_lead_take(&r->s->layout, &r->lead))
		return true;
	kvt_store_count(r->s, KVT_STAT_reclaim_deferred, 1);
	return false;
}

static gpointer run(gpointer data)
{
	struct kvt_reclaimer *r = data;
	double wait = r->interval;

	for (;;) {
		struct kvt_reclaim_result res;
		gint64 until = g_get_monotonic_time() + (gint64)(wait * G_USEC_PER_SEC);
		bool stop;

		g_mutex_lock(&r->lock);
		while (!r->stop && g_get_monotonic_time() < until)
			g_cond_wait_until(&r->cond, &r->lock, until);
		stop = r->stop;
		g_mutex_unlock(&r->lock);
		if (stop)
			return NULL;
		if (!lead(r)) {
			wait = MAX(r->interval, 1.0);
			continue;
		}
		kvt_reclaimer_pass(r, &res);
		/* A pass that stopped early costs almost nothing: not in a
		 * loop.  One that took long waits for its share. */
		wait = res.again ? 0 : res.aborted ? MAX(r->interval, 1.0) : r->interval;
		wait = MAX(wait, res.secs * (DUTY_SHARE - 1));
	}
}

void kvt_reclaimer_start(struct kvt_reclaimer *r, double interval)
{
	r->interval = interval;
	r->thread = g_thread_new("kvt-reclaim", run, r);
}

void kvt_reclaimer_free(struct kvt_reclaimer *r)
{
	if (!r)
		return;
	g_mutex_lock(&r->lock);
	g_atomic_int_set(&r->stop, 1);
	g_cond_broadcast(&r->cond);
	g_mutex_unlock(&r->lock);
	if (r->thread)
		g_thread_join(r->thread);
	kvt_lead_release(&r->lead);
	g_mutex_clear(&r->lock);
	g_cond_clear(&r->cond);
	g_free(r);
}
