/*
 * kvclient: verify.  Walk the directory, then check on --threads threads
 * that every *.bin and *.pt is one complete valid block under its own
 * name; count what was found against --expect and --min.
 */
#include "kvclient.h"

#include <dirent.h>

static char **g_files;
static size_t g_nfiles, g_capfiles;
static unsigned long long g_tmp_found;
static atomic_ullong g_enoent, g_eio;

/* --report: a listed name found absent or unreadable (what a file system
 * answers for a torn block) is counted and shown, not a failure.  1 when
 * it was taken so. */
static int reported(const char *path, const char *step, int e)
{
	if (!O.report || (e != ENOENT && e != EIO))
		return 0;
	atomic_fetch_add(e == ENOENT ? &g_enoent : &g_eio, 1);
	pthread_mutex_lock(&g_out_mu);
	printf("%s %s %s\n", path, step, e == ENOENT ? "enoent" : "eio");
	pthread_mutex_unlock(&g_out_mu);
	return 1;
}

static void add_file(const char *path)
{
	if (g_nfiles == g_capfiles) {
		g_capfiles = g_capfiles ? 2 * g_capfiles : 256;
		g_files = realloc(g_files, g_capfiles * sizeof(*g_files));
		if (!g_files)
			die("out of memory");
	}
	g_files[g_nfiles] = strdup(path);
	if (!g_files[g_nfiles])
		die("out of memory");
	g_nfiles++;
}

static void walk(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d) {
		failf(dir, 0, "opendir: %s", errname(errno));
		return;
	}
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX];
		struct stat st;
		int isdir, isreg;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_type == DT_UNKNOWN) {
			if (lstat(path, &st) < 0) {
				if (!reported(path, "lstat", errno))
					failf(path, 0, "lstat of listed name: %s",
					      errname(errno));
				errno = 0; /* not readdir's */
				continue;
			}
			isdir = S_ISDIR(st.st_mode);
			isreg = S_ISREG(st.st_mode);
		} else {
			isdir = de->d_type == DT_DIR;
			isreg = de->d_type == DT_REG;
		}
		if (ends_with(de->d_name, ".tmp")) {
			g_tmp_found++;
			if (O.no_tmp)
				failf(path, 0, "temp file is visible");
		}
		if (isdir)
			walk(path);
		else if (isreg && (ends_with(de->d_name, ".bin") ||
				   ends_with(de->d_name, ".pt")))
			add_file(path);
		else if (O.manifest && !ends_with(de->d_name, ".tmp"))
			failf(path, 0, "neither a block nor a temp file");
		errno = 0;
	}
	if (errno)
		failf(dir, 0, "readdir: %s", errname(errno));
	closedir(d);
}

static void *verify_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	size_t cap = O.size + ALIGN;
	unsigned char *buf = alloc_buf(cap);
	long long i;

	while (!stopped() &&
	       (i = (long long)atomic_fetch_add(&g_next, 1)) < (long long)g_nfiles) {
		const char *path = g_files[i];
		const char *base = strrchr(path, '/') + 1;
		char want[128];
		struct stat st;
		uint64_t key, ver;
		ssize_t n;
		int fd;

		atomic_fetch_add(&c->ops, 1);
		fd = open(path, O_RDONLY | dflag());
		if (fd < 0) {
			if (!reported(path, "open", errno))
				failf(path, 0, "open of listed name: %s",
				      errname(errno));
			continue;
		}
		if (fstat(fd, &st) < 0) {
			failf(path, 0, "fstat: %s", errname(errno));
			close(fd);
			continue;
		}
		if ((size_t)st.st_size + ALIGN > cap) {
			free(buf);
			cap = (size_t)st.st_size + ALIGN;
			buf = alloc_buf(cap);
		}
		n = read_whole(fd, buf, cap);
		if (n < 0) {
			int e = errno;

			if (!reported(path, "read", e))
				failf(path, 0, "read: %s", errname(e));
			close(fd);
			continue;
		}
		close(fd);
		if (n != st.st_size) {
			failf(path, n, "read %zd bytes but st_size is %lld", n,
			      (long long)st.st_size);
			verify_wrong((size_t)i);
			continue;
		}
		if (check_whole(path, buf, (size_t)n, UINT64_MAX,
				O.version_set ? O.version : 0,
				O.size_set ? O.size : 0, &key, &ver) < 0) {
			verify_wrong((size_t)i);
			continue;
		}
		if (ends_with(base, ".bin")) {
			char h[65];

			key_hash64(key, h);
			snprintf(want, sizeof(want), "%s.bin", h);
		} else {
			pt_name(want, sizeof(want), key);
		}
		if (strcmp(base, want) != 0) {
			failf(path, 0, "holds key %" PRIu64 " which belongs to "
			      "name %s", key, want);
			verify_wrong((size_t)i);
			continue;
		}
		verify_found((size_t)i, ends_with(base, ".bin") ? LAYOUT_BIN :
			     LAYOUT_PT, key, ver);
		atomic_fetch_add(&c->bytes, (unsigned long long)n);
		atomic_fetch_add(&c->stored, 1);
	}
	free(buf);
	return NULL;
}

int cmd_verify(void)
{
	struct counters c = { 0 };
	char extra[200];
	const char *counts;
	double t0 = now_sec();
	unsigned long long found;

	walk(O.dir);
	verify_files(g_nfiles);
	atomic_store(&g_next, 0);
	{
		int n = O.threads, i;
		pthread_t *t = calloc((size_t)n, sizeof(*t));
		struct worker *w = calloc((size_t)n, sizeof(*w));

		if (!t || !w)
			die("out of memory");
		for (i = 0; i < n; i++) {
			w[i].idx = i;
			w[i].c = &c;
			if (pthread_create(&t[i], NULL, verify_thread, &w[i]))
				die("pthread_create failed");
		}
		for (i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		free(t);
		free(w);
	}
	found = atomic_load(&c.stored);
	if (O.expect >= 0 && g_nfiles != (unsigned long long)O.expect)
		failf(O.dir, 0, "found %zu blocks, expected exactly %lld",
		      g_nfiles, O.expect);
	if (O.min >= 0 && g_nfiles < (unsigned long long)O.min)
		failf(O.dir, 0, "found %zu blocks, expected at least %lld",
		      g_nfiles, O.min);
	manifest_check(&counts);
	if (O.report)
		snprintf(extra, sizeof(extra),
			 "blocks=%zu valid=%llu tmp=%llu enoent=%llu eio=%llu %s",
			 g_nfiles, found, g_tmp_found, atomic_load(&g_enoent),
			 atomic_load(&g_eio), counts);
	else
		snprintf(extra, sizeof(extra), "blocks=%zu valid=%llu tmp=%llu %s",
			 g_nfiles, found, g_tmp_found, counts);
	summary("verify", &c, t0, extra);
	for (size_t i = 0; i < g_nfiles; i++)
		free(g_files[i]);
	free(g_files);
	return 0;
}
