/*
 * kvclient: the manifest, the client's own record of what the file system
 * acknowledged.  A crash test kills the daemon at any moment and then
 * needs to know exactly which stores had returned: the file (--manifest,
 * outside the mount) gets one line per acknowledged event, written with
 * one O_APPEND write(2) and fdatasync'd before the thread goes on:
 *
 *     + bin <key> <version>    rename() of the vLLM block returned
 *     + pt <key> <version>     close() of the LMCache file returned
 *     - bin <key> <version>    unlink() returned (or found it absent);
 *     - pt <key> <version>     the next store of the key writes <version>
 *                              or a later one (--version of the remover)
 *
 * The last line of a key decides what verify --manifest demands of it:
 * "+": present, complete, holding that version or a later one (a later
 * store may have been under way at the crash); "-": absent, or holding a
 * version written after the removal (one not yet acknowledged).  Versions
 * only grow, so an older one is a removed block come back.  A key with no
 * line may be absent or complete.  verify counts blocks with wrong
 * bytes (listed but not one complete valid block), acknowledged blocks
 * lost or older than acknowledged, and removed names that came back.
 *
 * Also here: the evict command (unlink a range of keys, as an evictor
 * does).
 */
#include "kvclient.h"

static int g_mfd = -1;

void manifest_open(void)
{
	if (!O.manifest)
		return;
	g_mfd = open(O.manifest, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		     0644);
	if (g_mfd < 0)
		die("--manifest %s: open: %s", O.manifest, strerror(errno));
}

static const char *layout_word(enum layout l)
{
	return l == LAYOUT_PT ? "pt" : "bin";
}

static void manifest_line(const char *line)
{
	size_t len = strlen(line);
	ssize_t n = write(g_mfd, line, len);

	/* the manifest is on a local disk of the test, not on the mount:
	 * a failure here is the test's, not the file system's */
	if (n != (ssize_t)len)
		die("--manifest %s: write: %s", O.manifest,
		    n < 0 ? strerror(errno) : "short write");
	if (fdatasync(g_mfd) < 0)
		die("--manifest %s: fdatasync: %s", O.manifest,
		    strerror(errno));
}

void manifest_stored(enum layout l, uint64_t key, uint64_t ver)
{
	char line[80];

	if (g_mfd < 0)
		return;
	snprintf(line, sizeof(line), "+ %s %" PRIu64 " %" PRIu64 "\n",
		 layout_word(l), key, ver);
	manifest_line(line);
}

void manifest_removed(enum layout l, uint64_t key, uint64_t next_ver)
{
	char line[80];

	if (g_mfd < 0)
		return;
	snprintf(line, sizeof(line), "- %s %" PRIu64 " %" PRIu64 "\n",
		 layout_word(l), key, next_ver);
	manifest_line(line);
}

/* ------------------------------------------------------------------ */
/* evict                                                              */

int cmd_evict(void)
{
	char path[PATH_MAX];
	unsigned long long removed = 0, absent = 0;
	double t0 = now_sec();

	manifest_open();
	for (uint64_t i = 0; i < O.blocks && !stopped(); i++) {
		uint64_t key = O.key_base + i;

		if (O.pt)
			pt_path(path, sizeof(path), key);
		else
			vllm_path(path, sizeof(path), key);
		if (unlink(path) == 0) {
			removed++;
		} else if (errno == ENOENT) {
			absent++;
		} else {
			if (!mount_gone(errno))
				failf(path, 0, "unlink: %s", errname(errno));
			continue;
		}
		manifest_removed(O.pt ? LAYOUT_PT : LAYOUT_BIN, key, O.version);
	}
	printf("evict: blocks=%" PRIu64 " removed=%llu absent=%llu errors=%llu "
	       "secs=%.2f\n", O.blocks, removed, absent,
	       atomic_load(&g_failures), now_sec() - t0);
	return 0;
}

/* ------------------------------------------------------------------ */
/* verify --manifest                                                  */

struct entry {
	uint64_t key, ver, seq;
	unsigned char layout, state; /* state: '+'/'-' (manifest), or
					1 valid, 2 wrong (found files) */
};

static struct entry *g_found;	/* per listed file, by its index */
static size_t g_nfound;

void verify_files(size_t n)
{
	g_nfound = n;
	g_found = calloc(n ? n : 1, sizeof(*g_found));
	if (!g_found)
		die("out of memory");
}

void verify_found(size_t idx, enum layout l, uint64_t key, uint64_t ver)
{
	g_found[idx] = (struct entry){ key, ver, 0, (unsigned char)l, 1 };
}

void verify_wrong(size_t idx)
{
	g_found[idx].state = 2;
}

static int cmp_key(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->layout != y->layout)
		return x->layout < y->layout ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return 0;
}

/* by key, the latest line first */
static int cmp_key_seq(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = cmp_key(a, b);

	if (c)
		return c;
	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

static size_t read_manifest(struct entry **out)
{
	FILE *f = fopen(O.manifest, "r");
	struct entry *e = NULL;
	size_t n = 0, cap = 0;
	char line[256], op, lw[8];
	unsigned long long key, ver;
	int k;

	if (!f)
		die("--manifest %s: %s", O.manifest, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		ver = 0;
		k = sscanf(line, "%c %7s %llu %llu", &op, lw, &key, &ver);
		if (k != 4 || (op != '+' && op != '-') ||
		    (strcmp(lw, "bin") && strcmp(lw, "pt")))
			die("--manifest %s: line %zu is not a manifest line: %s",
			    O.manifest, n + 1, line);
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			e = realloc(e, cap * sizeof(*e));
			if (!e)
				die("out of memory");
		}
		e[n] = (struct entry){ key, ver, n,
				       strcmp(lw, "pt") ? LAYOUT_BIN : LAYOUT_PT,
				       (unsigned char)op };
		n++;
	}
	fclose(f);
	*out = e;
	return n;
}

/* vllm-load --manifest: the vLLM keys whose last line is a store, in
 * *@keys (malloc'd); their number. */
size_t manifest_keys(uint64_t **keys)
{
	struct entry *m;
	size_t nm = read_manifest(&m), n = 0;

	qsort(m, nm, sizeof(*m), cmp_key_seq);
	*keys = malloc((nm ? nm : 1) * sizeof(**keys));
	if (!*keys)
		die("out of memory");
	for (size_t i = 0; i < nm; i++)
		if ((!i || cmp_key(&m[i], &m[i - 1])) && m[i].state == '+' &&
		    m[i].layout == LAYOUT_BIN)
			(*keys)[n++] = m[i].key;
	free(m);
	return n;
}

/*
 * Check the listed files against the manifest (after the walk and the
 * checks of verify.c).  Reports each failure; sets *extra to the counts
 * for the summary line.  Returns the number of manifest failures.
 */
int manifest_check(const char **extra)
{
	static char buf[256];
	struct entry *m, *valid;
	size_t nm, nv = 0, i, keys = 0;
	unsigned long long acked = 0, present = 0, lost = 0, stale = 0,
			   removed = 0, back = 0, wrong = 0;
	char path[PATH_MAX];

	for (i = 0; i < g_nfound; i++)
		wrong += g_found[i].state == 2;
	if (!O.manifest) {
		snprintf(buf, sizeof(buf), "wrong=%llu", wrong);
		*extra = buf;
		return 0;
	}
	nm = read_manifest(&m);
	valid = calloc(g_nfound ? g_nfound : 1, sizeof(*valid));
	if (!valid)
		die("out of memory");
	for (i = 0; i < g_nfound; i++)
		if (g_found[i].state == 1)
			valid[nv++] = g_found[i];
	qsort(valid, nv, sizeof(*valid), cmp_key);
	qsort(m, nm, sizeof(*m), cmp_key_seq);
	for (i = 0; i < nm; i++) {
		const struct entry *e = &m[i], *f;

		if (i && !cmp_key(e, &m[i - 1]))
			continue; /* an earlier line of the same key */
		keys++;
		f = bsearch(e, valid, nv, sizeof(*valid), cmp_key);
		if (e->layout == LAYOUT_PT)
			pt_path(path, sizeof(path), e->key);
		else
			vllm_path(path, sizeof(path), e->key);
		if (e->state == '-') {
			removed++;
			if (f && f->ver < e->ver) {
				back++;
				failf(path, 8, "removed (unlink returned) but "
				      "present again with version %" PRIu64
				      " (stores after the removal write %"
				      PRIu64 " or later)", f->ver, e->ver);
			}
			continue;
		}
		acked++;
		if (!f) {
			lost++;
			failf(path, 0, "acknowledged store of key %" PRIu64
			      " version %" PRIu64 " is not there (or not "
			      "readable whole)", e->key, e->ver);
		} else if (f->ver < e->ver) {
			stale++;
			failf(path, 8, "holds version %" PRIu64 ", older than "
			      "the acknowledged version %" PRIu64, f->ver,
			      e->ver);
		} else {
			present++;
		}
	}
	printf("verify manifest: lines=%zu keys=%zu acked=%llu present=%llu "
	       "lost=%llu stale=%llu removed=%llu back=%llu\n", nm, keys,
	       acked, present, lost, stale, removed, back);
	snprintf(buf, sizeof(buf), "wrong=%llu lost=%llu", wrong, lost + stale);
	*extra = buf;
	free(valid);
	free(m);
	return (int)(lost + stale + back);
}
