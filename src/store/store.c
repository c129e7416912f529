/* Opening and closing one mount's store: the layout, this mount's
 * staging directory and its lock, the staging left by dead mounts.  And
 * what the store's modules take from it (store-int.h): names unique in
 * the mount, reference ids, and the markers of moves in moves/ (why they
 * exist: the top of reclaim.c). */
#include "store.h"
#include "store-int.h"
#include "evictor.h"
#include "usage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* RENAME_EXCHANGE */
#include <string.h>
#include <unistd.h>

static guint remove_dead_stages(struct kvt_store *s)
{
	int ret;
	g_autoptr(GPtrArray) ents = kvt_dir_list(s->layout.staging, false, &ret);
	guint removed = 0;

	for (guint i = 0; ents && i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];

		/* A live mount's is busy and stays. */
		if (kvt_staging_remove(&s->layout, e->name) == 0)
			removed++;
	}
	return removed;
}

static int make_stage(struct kvt_store *s)
{
	char host[64] = "host";

	gethostname(host, sizeof(host) - 1);
	/* Each attempt lost is a removal of dead staging (every mount's
	 * start, every reclamation pass) that came in the few calls before
	 * the lock: on a loaded machine, with passes back to back, 8 in a
	 * row were seen lost (test-reclaim); each costs a few calls. */
	for (int attempt = 0; attempt < 64; attempt++) {
		struct stat st;
		int ret, fd;

		g_free(s->mount_id);
		s->mount_id = g_strdup_printf("%s.%d.%08x%08x", host, getpid(),
					      g_random_int(), g_random_int());
		ret = kvt_dir_mkdir(s->layout.staging, s->mount_id, 0700);
		if (ret == -EEXIST)
			continue;
		if (ret == 0)
			ret = kvt_dir_open(s->layout.staging, s->mount_id, &s->stage);
		if (ret == -ENOENT)
			continue; /* taken for a dead mount's already */
		if (ret < 0)
			return ret;
		/* Before the lock: whoever sees this mount live sees that it
		 * marks its moves (reclaim.c). */
		fd = kvt_dir_open_file(s->stage, KVT_MARKS_MOVES, O_WRONLY | O_CREAT, 0600, NULL);
		if (fd < 0) {
			g_clear_pointer(&s->stage, kvt_dir_unref);
			if (fd == -ENOENT)
				continue; /* taken for a dead mount's: start over */
			return fd;
		}
		close(fd);
		s->lockfd = kvt_staging_lock(s->stage, true);
		/* Held: no removal is under way here (kvt_staging_remove),
		 * but one may have finished, and taken our marks-moves. */
		if (s->lockfd >= 0 && kvt_dir_stat(s->stage, KVT_MARKS_MOVES, &st) == 0)
			return 0;
		if (s->lockfd >= 0) {
			close(g_steal_fd(&s->lockfd));
			kvt_staging_remove(&s->layout, s->mount_id);
		}
		/* A mount starting at the same instant took our lockless
		 * directory for a dead one: start over. */
		g_clear_pointer(&s->stage, kvt_dir_unref);
	}
	return -EAGAIN;
}

/* Whether the lower file system swaps two names (RENAME_EXCHANGE); a
 * publication learns then exactly which record it replaced.  And whether
 * it renames onto a new name only (RENAME_NOREPLACE); where it does not,
 * a publication links instead, without first paying for the refusal.
 * Asked once, of files in our staging. */
static int probe_renames(struct kvt_store *s)
{
	g_autofree char *a = kvt_store_stage_name(s, 'e');
	g_autofree char *b = kvt_store_stage_name(s, 'e');
	g_autofree char *c = kvt_store_stage_name(s, 'e');
	int ret = 0;

	for (const char *n = a; n && ret == 0; n = n == a ? b : NULL) {
		int fd = kvt_dir_open_file(s->stage, n, O_WRONLY | O_CREAT | O_EXCL, 0600, NULL);

		if (fd < 0)
			ret = fd;
		else
			close(fd);
	}
	if (ret == 0) {
		ret = kvt_dir_rename(s->stage, a, s->stage, b, RENAME_EXCHANGE);
		s->no_exchange = ret == -EINVAL;
		if (ret == -EINVAL)
			ret = 0;
	}
	if (ret == 0) {
		ret = kvt_dir_rename(s->stage, a, s->stage, c, RENAME_NOREPLACE);
		s->no_noreplace = ret == -EINVAL;
		if (ret == -EINVAL)
			ret = 0;
	}
	kvt_dir_unlink(s->stage, a);
	kvt_dir_unlink(s->stage, b);
	kvt_dir_unlink(s->stage, c);
	return ret;
}

/* Makes every missing fan-out directory of objects/, durably (once in a
 * store's life): a sync of an object's links then needs its fan-out
 * directory only, and no store waits for a sync of objects/. */
static int prepare_objects(struct kvt_store *s)
{
	bool made = false;

	for (int i = 0; i < KVT_FANOUT; i++) {
		char name[3];
		int ret;

		g_snprintf(name, sizeof(name), "%02x", i);
		ret = kvt_dir_mkdir(s->layout.objects, name, 0700);
		if (ret == 0)
			made = true;
		else if (ret != -EEXIST)
			return ret;
	}
	return made ? kvt_dir_sync(s->layout.objects) : 0;
}

/* The one line that says why the store cannot be opened. */
static void open_failed(GError **err, const char *lowerdir, const char *what, int ret)
{
	g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(-ret), "LOWERDIR %s: %s: %s",
		    lowerdir, what, g_strerror(-ret));
}

/* A store of an older format made this one's (layout.h), once no other
 * mount uses it: an older kvtierfs mounted there would take the records
 * written from now on for torn ones.  Its lock taken first (make_stage),
 * a mount that starts meanwhile finds it live, or this format. */
static bool upgrade(struct kvt_store *s, const char *lowerdir, GError **err)
{
	int ret = kvt_store_other_mount_live(s);

	if (ret == 1) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(EBUSY),
			    "LOWERDIR %s: store format %d, in use by another mount: unmount it "
			    "(every host), then mount again to upgrade the store to format %d",
			    lowerdir, s->layout.format, KVT_FORMAT_VERSION);
		return false;
	}
	if (ret == 0)
		ret = kvt_layout_write_marker(s->layout.root);
	if (ret < 0) {
		open_failed(err, lowerdir, "cannot upgrade the store's format", ret);
		return false;
	}
	s->upgraded_from = s->layout.format;
	s->layout.format = KVT_FORMAT_VERSION;
	return true;
}

struct kvt_store *kvt_store_open(const char *lowerdir, GError **err)
{
	struct kvt_store *s = g_new0(struct kvt_store, 1);
	int ret;

	s->lockfd = -1;
	g_mutex_init(&s->fanout_lock);
	if (!kvt_layout_open(lowerdir, KVT_LAYOUT_CREATE, &s->layout, err))
		goto fail;
	ret = kvt_dir_access(s->layout.staging, NULL, W_OK);
	if (ret < 0) {
		open_failed(err, lowerdir, "not writable", ret);
		goto fail;
	}
	ret = prepare_objects(s);
	if (ret < 0) {
		open_failed(err, lowerdir, "cannot create objects/", ret);
		goto fail;
	}
	/* A store made before moves/ existed gets it now (layout.h). */
	if (!s->layout.moves) {
		ret = kvt_dir_mkdir(s->layout.root, KVT_MOVES, 0700);
		if (ret == 0 || ret == -EEXIST)
			ret = kvt_dir_open(s->layout.root, KVT_MOVES, &s->layout.moves);
		if (ret < 0) {
			open_failed(err, lowerdir, "cannot create " KVT_MOVES "/", ret);
			goto fail;
		}
	}
	s->stale_removed = remove_dead_stages(s);
	ret = make_stage(s);
	if (ret < 0) {
		open_failed(err, lowerdir, "cannot create staging", ret);
		goto fail;
	}
	s->silly_renames = kvt_dir_on_nfs(s->layout.objects);
	ret = probe_renames(s);
	if (ret < 0) {
		open_failed(err, lowerdir, "cannot write in staging", ret);
		goto fail;
	}
	if (s->layout.format < KVT_FORMAT_VERSION && !upgrade(s, lowerdir, err))
		goto fail;
	return s;
fail:
	kvt_store_close(s);
	return NULL;
}

void kvt_store_close(struct kvt_store *s)
{
	if (!s)
		return;
	kvt_evictor_stop(s);
	kvt_usage_stop(s);
	if (s->lockfd >= 0) {
		/* Our own lock is held through another file description:
		 * let go of it first, or the removal would find it busy. */
		close(s->lockfd);
		kvt_staging_remove(&s->layout, s->mount_id);
	}
	for (int i = 0; i < KVT_FANOUT; i++)
		kvt_dir_unref(s->fanout[i]);
	kvt_dir_unref(s->stage);
	kvt_layout_close(&s->layout);
	g_mutex_clear(&s->fanout_lock);
	g_free(s->mount_id);
	g_free(s);
}

struct kvt_dir *kvt_store_names(struct kvt_store *s)
{
	return s->layout.names;
}

guint kvt_store_stale_removed(struct kvt_store *s)
{
	return s->stale_removed;
}

mode_t kvt_store_root_closed_from(struct kvt_store *s)
{
	return s->layout.root_closed_from;
}

bool kvt_store_no_exchange(struct kvt_store *s)
{
	return __atomic_load_n(&s->no_exchange, __ATOMIC_RELAXED);
}

int kvt_store_upgraded_from(struct kvt_store *s)
{
	return s->upgraded_from;
}

int kvt_store_other_mount_live(struct kvt_store *s)
{
	int ret;
	g_autoptr(GPtrArray) ents = kvt_dir_list(s->layout.staging, false, &ret);

	if (!ents)
		return ret;
	for (guint i = 0; i < ents->len; i++) {
		const struct kvt_dirent *e = ents->pdata[i];

		if (strcmp(e->name, s->mount_id) && kvt_staging_live(&s->layout, e->name) == 1)
			return 1;
	}
	return 0;
}

void kvt_store_set_stats(struct kvt_store *s, struct kvt_stats *stats)
{
	s->stats = stats;
}

char *kvt_store_stage_name(struct kvt_store *s, char kind)
{
	return g_strdup_printf("%c.%" G_GINT64_MODIFIER "x", kind,
			       (guint64)__atomic_fetch_add(&s->seq, 1, __ATOMIC_RELAXED));
}

const char *kvt_store_token(struct kvt_store *s)
{
	return s->mount_id + strlen(s->mount_id) - KVT_TOKEN_LEN;
}

void kvt_store_new_ref(struct kvt_store *s, char ref[KVT_REF_MAX])
{
	/* The mount's random token and a sequence number. */
	g_snprintf(ref, KVT_REF_MAX, "%.8s%" G_GINT64_MODIFIER "x", kvt_store_token(s),
		   (guint64)__atomic_fetch_add(&s->seq, 1, __ATOMIC_RELAXED));
}

int kvt_store_move_begin(struct kvt_store *s, char **marker)
{
	g_autofree char *name = g_strdup_printf(
		"%s.%" G_GINT64_MODIFIER "x", kvt_store_token(s),
		(guint64)__atomic_fetch_add(&s->seq, 1, __ATOMIC_RELAXED));
	kvt_autofd fd = kvt_dir_open_file(s->layout.moves, name, O_WRONLY | O_CREAT | O_EXCL,
					  0600, NULL);

	if (fd < 0)
		return fd;
	*marker = g_steal_pointer(&name);
	return 0;
}

void kvt_store_move_end(struct kvt_store *s, char *marker)
{
	int ret = kvt_dir_unlink(s->layout.moves, marker);

	/* A marker that stays stops every pass until this mount is gone:
	 * safe, and said. */
	if (ret < 0 && ret != -ENOENT)
		g_warning("%s/%s: %s: reclamation waits for this mount to end", KVT_MOVES,
			  marker, g_strerror(-ret));
	g_free(marker);
}
