/* kvtierfs-stat: a mount's counters, space, budget and recent purges,
 * read from the xattrs of its root (user.kvtierfs.stats, .mount, .purges), for a
 * person or, as JSON or Prometheus text, for a machine.  No socket: what
 * getfattr can read, this reads.  The daemon shows a caller other than
 * root (or the user who mounted) fewer counters, and purges without their
 * paths (xattr.c): shown as they come, a counter absent is left out. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>

#include <glib.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* What each counter means (stats.h), and where a person finds it.  A
 * counter a newer daemon adds shows under "other". */
static const struct {
	const char *name, *group, *help;
} known[] = {
	{ "lookups", "lookups", "LOOKUP requests" },
	{ "hits", "lookups", "Lookups that found a name" },
	{ "misses", "lookups", "Lookups that found no name (ENOENT)" },
	{ "stores", "stores", "Versions published" },
	{ "dedups", "stores", "Publications whose bytes an existing object already held" },
	{ "objects", "stores", "New objects written by this mount" },
	{ "bytes_stored", "stores", "Bytes of the new objects" },
	{ "bytes_in", "stores", "Bytes written by clients" },
	{ "aligned_writes", "stores", "WRITEs whose bytes arrived page-aligned" },
	{ "loads", "loads", "Opens for reading of published files" },
	{ "verified", "loads", "Objects hashed and found intact" },
	{ "copy_waits", "loads", "Opens that waited for memory for a verified copy" },
	{ "uncopied", "loads", "Opens served from the lower file for want of such memory" },
	{ "bytes_out", "loads", "Bytes read by clients" },
	{ "purges", "torn", "Names removed because their object was torn" },
	{ "torn_size", "torn", "Objects missing or of the wrong size" },
	{ "torn_hash", "torn", "Objects whose bytes do not match their hash" },
	{ "short_reads", "torn", "Reads that found fewer bytes than recorded" },
	{ "unlinks", "removals", "Published names removed by clients (unlink)" },
	{ "orphans_reclaimed", "removals", "Object links no record used, removed" },
	{ "orphan_bytes_reclaimed", "removals", "Bytes of the orphan objects removed" },
	{ "reclaim_passes", "removals", "Orphan reclamation passes that swept" },
	{ "reclaim_aborted", "removals", "Orphan reclamation passes stopped before sweeping" },
	{ "reclaim_deferred", "removals", "Orphan reclamation passes left to the mount that reclaims" },
	{ "scrub_objects", "torn", "Objects the scrub hashed" },
	{ "scrub_bytes", "torn", "Bytes the scrub hashed" },
	{ "scrub_rotten", "torn", "Objects the scrub found rotten, removed" },
	{ "scrub_passes", "torn", "Scrub passes over the whole store" },
	{ "evictions", "eviction", "Names the evictor removed to keep the tier under its budget" },
	{ "evicted_bytes", "eviction", "Bytes of the objects of the names the evictor removed" },
	{ "evict_passes", "eviction", "Eviction passes" },
	{ "evict_pass_us", "eviction", "Time the eviction passes took, in all" },
	{ "room_waits", "eviction", "Stores that waited for the evictor to make room" },
	{ "room_wait_us", "eviction", "Time the stores waited for room, in all" },
	{ "lower_errors", "other", "Failures of the lower file system (EIO, ESTALE, ENOSPC, ...)" },
};
static const char *const groups[] = { "lookups", "stores", "loads",	"torn",
				      "removals", "eviction", "other" };

struct sample {
	GPtrArray *names;	/* counters, in the daemon's order */
	GArray *values;		/* guint64, same order */
	GHashTable *mount;	/* user.kvtierfs.mount: key -> value */
	GPtrArray *purges;	/* "unix-seconds message" lines */
	struct statvfs sv;
	gint64 when;		/* monotonic, microseconds */
};

static void sample_clear(struct sample *s)
{
	if (s->names)
		g_ptr_array_unref(s->names);
	if (s->values)
		g_array_unref(s->values);
	if (s->mount)
		g_hash_table_unref(s->mount);
	if (s->purges)
		g_ptr_array_unref(s->purges);
	memset(s, 0, sizeof(*s));
}

/* The value of xattr @name of @path, or NULL with errno set. */
static char *read_xattr(const char *path, const char *name)
{
	for (int tries = 0; tries < 8; tries++) {
		ssize_t n = getxattr(path, name, NULL, 0);
		g_autofree char *buf = NULL;

		if (n < 0)
			return NULL;
		buf = g_malloc(n + 1);
		n = getxattr(path, name, buf, n);
		if (n >= 0) {
			buf[n] = '\0';
			return g_steal_pointer(&buf);
		}
		if (errno != ERANGE) /* grew in between: again */
			return NULL;
	}
	return NULL;
}

static gboolean sample_read(const char *path, struct sample *s, GError **err)
{
	g_autofree char *stats = read_xattr(path, "user.kvtierfs.stats");
	g_autofree char *mount = NULL, *purges = NULL;
	g_auto(GStrv) lines = NULL;

	if (!stats) {
		int e = errno;

		if (e == ENODATA || e == ENOTSUP)
			g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_INVAL,
				    "%s: not the root of a kvtierfs mount (no user.kvtierfs.stats)", path);
		else
			g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s", path,
				    g_strerror(e));
		return FALSE;
	}
	mount = read_xattr(path, "user.kvtierfs.mount");
	purges = read_xattr(path, "user.kvtierfs.purges");
	s->names = g_ptr_array_new_with_free_func(g_free);
	s->values = g_array_new(FALSE, FALSE, sizeof(guint64));
	s->mount = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	s->purges = g_ptr_array_new_with_free_func(g_free);
	lines = g_strsplit(stats, "\n", -1);
	for (char **l = lines; *l; l++) {
		char *sp = strchr(*l, ' ');
		guint64 v;

		if (!sp || !g_ascii_string_to_unsigned(sp + 1, 10, 0, G_MAXUINT64, &v, NULL))
			continue;
		g_ptr_array_add(s->names, g_strndup(*l, sp - *l));
		g_array_append_val(s->values, v);
	}
	g_strfreev(lines);
	lines = mount ? g_strsplit(mount, "\n", -1) : NULL;
	for (char **l = lines; l && *l; l++) {
		char *sp = strchr(*l, ' ');

		if (sp)
			g_hash_table_replace(s->mount, g_strndup(*l, sp - *l), g_strdup(sp + 1));
	}
	g_strfreev(g_steal_pointer(&lines));
	lines = purges ? g_strsplit(purges, "\n", -1) : NULL;
	for (char **l = lines; l && *l; l++)
		if (**l)
			g_ptr_array_add(s->purges, g_strdup(*l));
	if (statvfs(path, &s->sv))
		memset(&s->sv, 0, sizeof(s->sv));
	s->when = g_get_monotonic_time();
	return TRUE;
}

static const char *group_of(const char *name)
{
	for (size_t i = 0; i < G_N_ELEMENTS(known); i++)
		if (!strcmp(known[i].name, name))
			return known[i].group;
	return "other";
}

static const char *help_of(const char *name)
{
	for (size_t i = 0; i < G_N_ELEMENTS(known); i++)
		if (!strcmp(known[i].name, name))
			return known[i].help;
	return NULL;
}

static bool is_bytes(const char *name)
{
	return strstr(name, "bytes") != NULL;
}

/* The value of counter @name in @s, or -1 when it has none. */
static int index_of(const struct sample *s, const char *name)
{
	for (guint i = 0; s && i < s->names->len; i++)
		if (!strcmp(g_ptr_array_index(s->names, i), name))
			return (int)i;
	return -1;
}

/* A counter of microseconds (the time passes took): shown as a time. */
static bool is_usecs(const char *name)
{
	return g_str_has_suffix(name, "_us");
}

static char *human_size(guint64 v)
{
	return g_format_size_full(v, G_FORMAT_SIZE_IEC_UNITS);
}

static char *human_usecs(guint64 v)
{
	if (v < 1000)
		return g_strdup_printf("%" G_GUINT64_FORMAT " us", v);
	if (v < G_USEC_PER_SEC)
		return g_strdup_printf("%.1f ms", v / 1e3);
	return g_strdup_printf("%.1f s", v / 1e6);
}

static const char *mount_value(const struct sample *s, const char *key)
{
	const char *v = g_hash_table_lookup(s->mount, key);

	return v ? v : "?";
}

/* The budget's lines of user.kvtierfs.mount (xattr.c): absent without
 * a budget, usage absent until the mount has counted it, the index's
 * without an evictor. */
struct budget {
	guint64 bytes;
	bool counted;
	guint64 usage;
	const char *evict;	/* "off" without an evictor */
	bool evictor, indexed, lead;
	guint64 indexed_blocks, indexed_bytes, pinned_bytes;
};

static bool mount_u64(const struct sample *s, const char *key, guint64 *out)
{
	const char *v = g_hash_table_lookup(s->mount, key);

	return v && g_ascii_string_to_unsigned(v, 10, 0, G_MAXUINT64, out, NULL);
}

/* False when the mount has no budget. */
static bool budget_of(const struct sample *s, struct budget *b)
{
	guint64 indexed = 0, lead = 0;

	memset(b, 0, sizeof(*b));
	if (!mount_u64(s, "budget", &b->bytes))
		return false;
	b->counted = mount_u64(s, "usage", &b->usage);
	b->evict = g_hash_table_lookup(s->mount, "evict");
	if (!b->evict)
		b->evict = "off";
	b->evictor = strcmp(b->evict, "off") && mount_u64(s, "indexed", &indexed) &&
		     mount_u64(s, "indexed_blocks", &b->indexed_blocks) &&
		     mount_u64(s, "indexed_bytes", &b->indexed_bytes) &&
		     mount_u64(s, "pinned_bytes", &b->pinned_bytes);
	b->indexed = indexed != 0;
	b->lead = mount_u64(s, "evict_lead", &lead) && lead;
	return true;
}

static double budget_pct(const struct budget *b)
{
	return b->bytes ? 100.0 * (double)b->usage / (double)b->bytes : 0;
}

/* "  budget   6.0 MiB used of 8.0 MiB (75.0%), ..." */
static void print_budget(const struct budget *b)
{
	g_autofree char *total = human_size(b->bytes), *used = human_size(b->usage);
	g_autofree char *pinned = human_size(b->pinned_bytes);
	g_autofree char *ibytes = human_size(b->indexed_bytes);

	printf("  %-8s ", "budget");
	if (b->counted)
		printf("%s used of %s (%.1f%%)", used, total, budget_pct(b));
	else
		printf("%s, usage being counted", total);
	if (!b->evictor) {
		printf("; evict off\n");
		return;
	}
	printf(", %s pinned; evict %s, %s %" G_GUINT64_FORMAT " blocks, %s%s%s\n", pinned,
	       b->evict, b->indexed ? "indexed" : "index being built:", b->indexed_blocks, ibytes,
	       b->indexed ? "" : " so far",
	       b->indexed && !b->lead ? "; another mount evicts past evict_high" : "");
}

static void print_human(const char *path, const struct sample *s, const struct sample *prev)
{
	guint64 total = (guint64)s->sv.f_blocks * s->sv.f_frsize;
	guint64 avail = (guint64)s->sv.f_bavail * s->sv.f_frsize;
	guint64 used = total - (guint64)s->sv.f_bfree * s->sv.f_frsize;
	g_autofree char *t = human_size(total), *a = human_size(avail), *u = human_size(used);
	double secs = prev ? (s->when - prev->when) / 1e6 : 0;
	gint64 started = g_ascii_strtoll(mount_value(s, "started"), NULL, 10);
	gint64 up = started > 0 ? g_get_real_time() / G_USEC_PER_SEC - started : -1;
	struct budget b;
	bool has_budget = budget_of(s, &b);

	printf("kvtierfs on %s: store %s, version %s, pid %s, up %" G_GINT64_FORMAT
	       "h%02" G_GINT64_FORMAT "m%02" G_GINT64_FORMAT "s, verify %s%s\n",
	       path, mount_value(s, "store"), mount_value(s, "version"), mount_value(s, "pid"),
	       up / 3600, up / 60 % 60, up % 60, mount_value(s, "verify"),
	       !strcmp(mount_value(s, "shared"), "1") ? ", shared with another mount" : "");
	printf("  %-8s %s used, %s free of %s; %llu of %llu inodes free\n", "space", u, a, t,
	       (unsigned long long)s->sv.f_ffree, (unsigned long long)s->sv.f_files);
	if (has_budget)
		print_budget(&b);
	for (size_t g = 0; g < G_N_ELEMENTS(groups); g++) {
		g_autoptr(GString) line = g_string_new(NULL);

		/* Without a budget there is no evictor: its counters stay 0. */
		if (!has_budget && !strcmp(groups[g], "eviction"))
			continue;
		for (guint i = 0; i < s->names->len; i++) {
			const char *name = g_ptr_array_index(s->names, i);
			guint64 v = g_array_index(s->values, guint64, i);
			int j = index_of(prev, name);

			if (strcmp(group_of(name), groups[g]))
				continue;
			if (is_bytes(name)) {
				g_autofree char *h = human_size(v);

				g_string_append_printf(line, "  %s %s", name, h);
			} else if (is_usecs(name)) {
				g_autofree char *h = human_usecs(v);

				/* evict_pass_us as evict_pass_time */
				g_string_append_printf(line, "  %.*s_time %s",
						       (int)(strlen(name) - 3), name, h);
			} else {
				g_string_append_printf(line, "  %s %" G_GUINT64_FORMAT, name, v);
			}
			/* A counter that went down: the mount started again. */
			if (j >= 0 && secs > 0 && v >= g_array_index(prev->values, guint64, j)) {
				double rate = (v - g_array_index(prev->values, guint64, j)) / secs;

				if (is_bytes(name)) {
					g_autofree char *h = human_size((guint64)llround(rate));

					g_string_append_printf(line, " (%s/s)", h);
				} else if (is_usecs(name)) {
					/* microseconds a second: the share of the time */
					g_string_append_printf(line, " (%.1f%% busy)", rate / 1e4);
				} else {
					g_string_append_printf(line, " (%.1f/s)", rate);
				}
			}
		}
		if (line->len)
			printf("  %-8s%s\n", groups[g], line->str);
	}
	if (!s->purges->len) {
		printf("  recent purges: none\n");
		return;
	}
	printf("  recent purges (the last %u):\n", s->purges->len);
	for (guint i = 0; i < s->purges->len; i++) {
		const char *l = g_ptr_array_index(s->purges, i);
		char *sp = strchr(l, ' ');
		g_autoptr(GDateTime) dt = g_date_time_new_from_unix_local(g_ascii_strtoll(l, NULL, 10));
		g_autofree char *when = dt ? g_date_time_format(dt, "%F %T") : g_strdup("?");

		printf("    %s %s\n", when, sp ? sp + 1 : l);
	}
}

/* @s as a JSON string, quotes included. */
static void json_str(GString *out, const char *s)
{
	g_string_append_c(out, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			g_string_append_printf(out, "\\%c", *p);
		else if (*p < 0x20)
			g_string_append_printf(out, "\\u%04x", *p);
		else
			g_string_append_c(out, *p);
	}
	g_string_append_c(out, '"');
}

static void print_json(const char *path, const struct sample *s, const struct sample *prev)
{
	g_autoptr(GString) o = g_string_new("{\"mountpoint\":");
	double secs = prev ? (s->when - prev->when) / 1e6 : 0;
	static const char *const ints[] = { "pid", "started", "shared" };
	struct budget b;

	json_str(o, path);
	g_string_append(o, ",\"store\":");
	json_str(o, mount_value(s, "store"));
	g_string_append(o, ",\"version\":");
	json_str(o, mount_value(s, "version"));
	g_string_append(o, ",\"verify\":");
	json_str(o, mount_value(s, "verify"));
	for (size_t i = 0; i < G_N_ELEMENTS(ints); i++)
		g_string_append_printf(o, ",\"%s\":%" G_GINT64_FORMAT, ints[i],
				       g_ascii_strtoll(mount_value(s, ints[i]), NULL, 10));
	g_string_append_printf(o, ",\"space\":{\"bytes_total\":%llu,\"bytes_free\":%llu,"
			       "\"bytes_avail\":%llu,\"files_total\":%llu,\"files_free\":%llu}",
			       (unsigned long long)s->sv.f_blocks * s->sv.f_frsize,
			       (unsigned long long)s->sv.f_bfree * s->sv.f_frsize,
			       (unsigned long long)s->sv.f_bavail * s->sv.f_frsize,
			       (unsigned long long)s->sv.f_files,
			       (unsigned long long)s->sv.f_ffree);
	if (budget_of(s, &b)) {
		g_string_append_printf(o, ",\"budget\":{\"bytes\":%" G_GUINT64_FORMAT, b.bytes);
		if (b.counted)
			g_string_append_printf(o, ",\"usage_bytes\":%" G_GUINT64_FORMAT
					       ",\"usage_percent\":%.1f", b.usage, budget_pct(&b));
		else
			g_string_append(o, ",\"usage_bytes\":null,\"usage_percent\":null");
		g_string_append(o, ",\"evict\":");
		json_str(o, b.evictor ? b.evict : "off");
		if (b.evictor)
			g_string_append_printf(o, ",\"pinned_bytes\":%" G_GUINT64_FORMAT
					       ",\"indexed\":%s,\"indexed_blocks\":%" G_GUINT64_FORMAT
					       ",\"indexed_bytes\":%" G_GUINT64_FORMAT
					       ",\"evict_lead\":%s",
					       b.pinned_bytes, b.indexed ? "true" : "false",
					       b.indexed_blocks, b.indexed_bytes,
					       b.lead ? "true" : "false");
		g_string_append(o, "}");
	}
	g_string_append(o, ",\"counters\":{");
	for (guint i = 0; i < s->names->len; i++)
		g_string_append_printf(o, "%s\"%s\":%" G_GUINT64_FORMAT, i ? "," : "",
				       (char *)g_ptr_array_index(s->names, i),
				       g_array_index(s->values, guint64, i));
	g_string_append(o, "}");
	if (secs > 0) {
		bool first = true;

		g_string_append_printf(o, ",\"interval\":%.3f,\"rates\":{", secs);
		for (guint i = 0; i < s->names->len; i++) {
			const char *name = g_ptr_array_index(s->names, i);
			int j = index_of(prev, name);
			guint64 now, then;

			if (j < 0)
				continue;
			now = g_array_index(s->values, guint64, i);
			then = g_array_index(prev->values, guint64, j);
			if (now < then) /* the mount started again */
				continue;
			g_string_append_printf(o, "%s\"%s\":%.3f", first ? "" : ",", name,
					       (now - then) / secs);
			first = false;
		}
		g_string_append(o, "}");
	}
	g_string_append(o, ",\"recent_purges\":[");
	for (guint i = 0; i < s->purges->len; i++) {
		const char *l = g_ptr_array_index(s->purges, i);
		char *sp = strchr(l, ' ');

		g_string_append_printf(o, "%s{\"time\":%" G_GINT64_FORMAT ",\"message\":",
				       i ? "," : "", g_ascii_strtoll(l, NULL, 10));
		json_str(o, sp ? sp + 1 : l);
		g_string_append(o, "}");
	}
	g_string_append(o, "]}");
	puts(o->str);
}

/* A label value: backslash, double quote and newline escaped. */
static char *prom_label(const char *s)
{
	GString *o = g_string_new(NULL);

	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			g_string_append_printf(o, "\\%c", *s);
		else if (*s == '\n')
			g_string_append(o, "\\n");
		else
			g_string_append_c(o, *s);
	}
	return g_string_free(o, FALSE);
}

static void prom_metric(const char *name, const char *type, const char *help,
			const char *labels, const char *value)
{
	printf("# HELP kvtierfs_%s %s\n# TYPE kvtierfs_%s %s\nkvtierfs_%s{%s} %s\n", name, help,
	       name, type, name, labels, value);
}

static void prom_gauge(const char *name, const char *help, const char *labels, guint64 v)
{
	g_autofree char *value = g_strdup_printf("%" G_GUINT64_FORMAT, v);

	prom_metric(name, "gauge", help, labels, value);
}

/* @mp: the mount point, escaped as a label value. */
static void prom_budget(const struct budget *b, const char *labels, const char *mp)
{
	g_autofree char *policy = prom_label(b->evictor ? b->evict : "off");
	g_autofree char *info = g_strdup_printf("mountpoint=\"%s\",policy=\"%s\"", mp, policy);

	prom_gauge("budget_bytes", "Bytes the tier's objects may hold (-o max_size, -o min_free)",
		   labels, b->bytes);
	if (b->counted)
		prom_gauge("usage_bytes", "Bytes the tier's objects hold", labels, b->usage);
	prom_metric("evict_info", "gauge", "The eviction policy (-o evict), off without an evictor",
		    info, "1");
	if (!b->evictor)
		return;
	prom_gauge("pinned_bytes", "Bytes of the blocks open, which are never evicted", labels,
		   b->pinned_bytes);
	prom_gauge("indexed", "1 once the evictor's index holds the whole store", labels,
		   b->indexed);
	prom_gauge("indexed_blocks", "Blocks in the evictor's index", labels, b->indexed_blocks);
	prom_gauge("indexed_bytes", "Bytes of the blocks in the evictor's index", labels,
		   b->indexed_bytes);
	prom_gauge("evict_lead", "1 when this mount evicts from the store past evict_high",
		   labels, b->lead);
}

static void print_prometheus(const char *path, const struct sample *s)
{
	struct budget b;
	g_autofree char *mp = prom_label(path);
	g_autofree char *store = prom_label(mount_value(s, "store"));
	g_autofree char *version = prom_label(mount_value(s, "version"));
	g_autofree char *labels = g_strdup_printf("mountpoint=\"%s\"", mp);
	g_autofree char *info = g_strdup_printf("mountpoint=\"%s\",store=\"%s\",version=\"%s\"",
						mp, store, version);
	const struct {
		const char *name, *help;
		unsigned long long v;
	} gauges[] = {
		{ "space_bytes", "Bytes of the store's file system",
		  (unsigned long long)s->sv.f_blocks * s->sv.f_frsize },
		{ "space_avail_bytes", "Bytes of the store's file system free for the mount",
		  (unsigned long long)s->sv.f_bavail * s->sv.f_frsize },
		{ "files", "Inodes of the store's file system", (unsigned long long)s->sv.f_files },
		{ "files_free", "Inodes of the store's file system free",
		  (unsigned long long)s->sv.f_ffree },
		{ "start_time_seconds", "Unix time the mount started",
		  (unsigned long long)g_ascii_strtoll(mount_value(s, "started"), NULL, 10) },
	};

	prom_metric("info", "gauge", "The mount, its store and kvtierfs's version", info, "1");
	for (size_t i = 0; i < G_N_ELEMENTS(gauges); i++) {
		g_autofree char *v = g_strdup_printf("%llu", gauges[i].v);

		prom_metric(gauges[i].name, "gauge", gauges[i].help, labels, v);
	}
	if (budget_of(s, &b))
		prom_budget(&b, labels, mp);
	for (guint i = 0; i < s->names->len; i++) {
		const char *name = g_ptr_array_index(s->names, i);
		guint64 n = g_array_index(s->values, guint64, i);
		const char *h = help_of(name);
		g_autofree char *fallback = g_strdup_printf("kvtierfs counter %s", name);
		g_autofree char *metric = NULL, *v = NULL, *help = NULL;

		/* Prometheus's unit of time is the second: evict_pass_us is
		 * kvtierfs_evict_pass_seconds_total. */
		if (is_usecs(name)) {
			metric = g_strdup_printf("%.*s_seconds_total", (int)(strlen(name) - 3), name);
			v = g_strdup_printf("%" G_GUINT64_FORMAT ".%06" G_GUINT64_FORMAT,
					    n / G_USEC_PER_SEC, n % G_USEC_PER_SEC);
			help = g_strdup_printf("%s, in seconds", h ? h : fallback);
		} else {
			metric = g_strdup_printf("%s_total", name);
			v = g_strdup_printf("%" G_GUINT64_FORMAT, n);
			help = g_strdup(h ? h : fallback);
		}
		prom_metric(metric, "counter", help, labels, v);
	}
}

static int usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

static int usage_error(const char *fmt, ...)
{
	g_autofree char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	fprintf(stderr, "kvtierfs-stat: %s (see kvtierfs-stat --help)\n", msg);
	return EXIT_USAGE;
}

/* Seconds between samples: a plain positive decimal number. */
static bool parse_interval(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s || strspn(s, "0123456789.") != strlen(s))
		return false;
	v = g_ascii_strtod(s, &end);
	if (*end || !(v >= 0.1 && v <= 86400))
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	gboolean opt_json = FALSE, opt_prom = FALSE, opt_version = FALSE;
	g_autofree char *opt_watch = NULL;
	GOptionEntry entries[] = {
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &opt_json, "One JSON object a sample", NULL },
		{ "prometheus", 'p', 0, G_OPTION_ARG_NONE, &opt_prom,
		  "Prometheus text exposition format", NULL },
		{ "watch", 'w', 0, G_OPTION_ARG_STRING, &opt_watch,
		  "A sample every SEC seconds, with rates, until interrupted", "SEC" },
		{ "version", 'V', 0, G_OPTION_ARG_NONE, &opt_version, "Print the version", NULL },
		{ NULL }
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("MOUNTPOINT");
	g_autoptr(GError) err = NULL;
	struct sample cur = { 0 }, prev = { 0 };
	double interval = 0;
	sigset_t stop;
	char *path;

	setlocale(LC_ALL, "");
	g_option_context_add_main_entries(ctx, entries, NULL);
	g_option_context_set_summary(ctx,
		"Shows the counters, space and recent purges of the kvtierfs mount\n"
		"at MOUNTPOINT.  Counters start at 0 with each mount.");
	g_option_context_set_description(ctx,
		"Exit status: 0 shown, 1 not a kvtierfs mount or unreadable, 2 usage\n"
		"error.  See kvtierfs-stat(1).");
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		return usage_error("%s", err->message);
	if (opt_version) {
		printf("kvtierfs-stat %s\n", PACKAGE_VERSION);
		return EXIT_OK;
	}
	if (argc != 2)
		return usage_error(argc < 2 ? "expects MOUNTPOINT" : "expects one MOUNTPOINT only");
	if (opt_json && opt_prom)
		return usage_error("--json and --prometheus exclude each other");
	if (opt_watch && !parse_interval(opt_watch, &interval))
		return usage_error("--watch: expects seconds from 0.1 to 86400, got '%s'", opt_watch);
	if (opt_watch && opt_prom)
		return usage_error("--prometheus gives one sample; a scraper polls it");
	/* The mount point as the mount table has it, for labels. */
	path = realpath(argv[1], NULL);
	if (!path) {
		fprintf(stderr, "kvtierfs-stat: %s: %s\n", argv[1], g_strerror(errno));
		return EXIT_FAIL;
	}

	/* --watch ends on SIGINT or SIGTERM, taken between samples. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	if (opt_watch)
		sigprocmask(SIG_BLOCK, &stop, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		struct timespec ts;

		if (!sample_read(path, &cur, &err)) {
			fprintf(stderr, "kvtierfs-stat: %s\n", err->message);
			sample_clear(&prev);
			free(path);
			return EXIT_FAIL;
		}
		if (opt_prom)
			print_prometheus(path, &cur);
		else if (opt_json)
			print_json(path, &cur, prev.names ? &prev : NULL);
		else
			print_human(path, &cur, prev.names ? &prev : NULL);
		sample_clear(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
		if (!opt_watch)
			break;
		if (!opt_json)
			putchar('\n');
		ts.tv_sec = (time_t)interval;
		ts.tv_nsec = (long)((interval - (double)ts.tv_sec) * 1e9);
		if (sigtimedwait(&stop, NULL, &ts) >= 0)
			break;
	}
	sample_clear(&prev);
	free(path);
	return EXIT_OK;
}
