/*
 * kvclient: replay the file access patterns of LLM KV-cache clients (vLLM,
 * llm-d, LMCache; see docs CLIENTS.md) against a directory and check every
 * byte that is read back.
 *
 * Build (automake does it as tests/kvclient, check_PROGRAMS):
 *     gcc -O2 -Wall -Wextra -Werror -pthread -o kvclient tests/kvclient.c
 *
 * Block format.  A block is a function of (key, version, size) only, so any
 * reader can check it without a shared table:
 *
 *     bytes  0..7   key      (u64, little endian)
 *     bytes  8..15  version  (u64, little endian, >= 1)
 *     bytes 16..23  size     (u64, little endian, the whole file length)
 *     bytes 24..31  check    mix64 of the three above (a torn or foreign
 *                            header is recognised as such)
 *     bytes 32..    counter-based splitmix64 stream seeded from
 *                   (key, version): the 8-byte word at file offset 8*i is
 *                   mix64(seed + (i + 1) * golden), little endian.
 *
 * The stream is counter based (not a sequential xorshift), so the expected
 * bytes at any offset are computed directly: tail reads at arbitrary offsets
 * (llm-d) are checked without generating the head.
 *
 * Exit status: 0 all checks passed, 1 a check failed (each failure is
 * reported on stderr with the path and file offset), 2 usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define HDR_LEN 32
#define HDR_MAGIC 0x4b5654494552465aULL
#define GOLDEN 0x9e3779b97f4a7c15ULL
#define ALIGN 4096
#define MAX_SHOWN_FAILURES 20

static const char usage_text[] =
"usage: kvclient COMMAND --dir DIR [OPTIONS]\n"
"\n"
"Commands (every read is checked byte for byte):\n"
"  vllm-store   vLLM fs tier store: O_DIRECT probe file, then per block\n"
"               access(F_OK) skip, mkdir -p, open(dest_<u63>.tmp,\n"
"               O_CREAT|O_EXCL|O_WRONLY|O_TRUNC[|O_DIRECT]), ONE write, close,\n"
"               rename(tmp, dest).\n"
"  vllm-load    vLLM load: access(F_OK), open(O_RDONLY[|O_DIRECT]), ONE read\n"
"               of --size bytes from offset 0 (short read = failure), compare.\n"
"  llmd-store   llm-d store: open(dest,O_RDONLY) probe; if present utimensat\n"
"               (atime=NOW, mtime=OMIT) and check mtime kept, atime moved;\n"
"               else write dest_<u32>.tmp in --chunk pieces, rename while the\n"
"               fd is open, then close.\n"
"  llmd-load    llm-d load: open, lseek(SEEK_END) must equal --size, pread\n"
"               the tail at several non-zero offsets, compare.\n"
"  llmd         llmd-store, llmd-store again (all present: probe+utimensat\n"
"               path), llmd-load.\n"
"  lmcache      --writers write <dir>/kv-<16hex>.pt in place (O_CREAT|O_TRUNC,\n"
"               --chunk pieces), --rounds versions per key, while --readers\n"
"               read the same names: each read is ENOENT or one whole valid\n"
"               version, never older than a version the reader saw before.\n"
"               At the end every key holds its last version.\n"
"  race         --writers store the SAME --blocks names via tmp+rename (no\n"
"               access() skip), --rounds times with distinct versions, while\n"
"               --readers read them: each read is one whole valid version and\n"
"               a name never disappears once published.\n"
"  verify       walk DIR, check every *.bin and *.pt is one complete valid\n"
"               version whose key matches its name; print the count.\n"
"  probe        one vLLM-style load of the block of key --key-base (at its\n"
"               vLLM-layout path, or at --file):\n"
"               access(F_OK), open(O_RDONLY[|O_DIRECT]), ONE read of the\n"
"               bytes from --offset (default 0) to the end of the block\n"
"               (pread when --offset > 0), compare.  Prints ONE outcome on\n"
"               stdout:  ok (every byte right) | enoent | eio | short <n>\n"
"               (read returned n bytes) | wrong <offset> (first wrong byte,\n"
"               file offset) | sigbus <offset> (--mmap) | error <ERRNO>.\n"
"               enoent and eio come from access, open or read; the step is\n"
"               named on stderr.  --mmap: open (never O_DIRECT), mmap the\n"
"               block and copy it out instead of read().  --reread-after\n"
"               FILE: after the first outcome keep the fd open, wait until\n"
"               FILE exists (at most 120 s), read the same bytes again with\n"
"               pread on that fd and print a second outcome line.\n"
"               Exit 0 when every outcome is ok, else 1.\n"
"  paths        print the path of each key BASE..BASE+N-1 in the vLLM\n"
"               layout, relative to --dir, one per line.\n"
"\n"
"Options:\n"
"  --dir DIR          directory to work in (required)\n"
"  --blocks N         number of keys (default 64)\n"
"  --key-base N       first key (default 0); keys are BASE..BASE+N-1;\n"
"                     probe: the key of the block\n"
"  --threads N        store/load/verify threads (default 16)\n"
"  --writers N        lmcache/race writer threads (default 2)\n"
"  --readers N        lmcache/race reader threads (default 4)\n"
"  --rounds N         lmcache/race versions written per key (default 20)\n"
"  --size BYTES       block size, K/M/G suffixes (default 2M; >= 32;\n"
"                     a multiple of 4096 with --odirect)\n"
"  --chunk BYTES      write chunk for llmd/lmcache (default 1M)\n"
"  --odirect          use O_DIRECT (default for vllm-* and probe without\n"
"                     --mmap)\n"
"  --buffered         no O_DIRECT (default for llmd*, lmcache, race, verify)\n"
"  --version N        version to write / expect (default 1); for verify,\n"
"                     require this version (default: any)\n"
"  --model NAME       model name in the vLLM layout (default kvclient-model)\n"
"  --progress N       stores: print \"progress <stored>\" on stdout every N\n"
"                     published blocks\n"
"  --no-rename        vllm-store: write and close the .tmp files but never\n"
"                     rename them (a client that died before rename)\n"
"  --stop-on-enospc   stores: ENOSPC ends the run without counting as a\n"
"                     failure; the failed name must not exist; prints\n"
"                     \"enospc <path>\"; exit 1 if ENOSPC never came\n"
"  --keep-going       do not stop all threads at the first failure\n"
"                     (always on for verify, *-load, lmcache, race)\n"
"  --expect N         verify: exactly N blocks must be found\n"
"  --min N            verify: at least N blocks must be found\n"
"  --no-tmp           verify: any *.tmp name found is a failure\n"
"  --seed N           seed for temp-name suffixes (default: time and pid)\n"
"  --offset BYTES     probe: first byte to read (default 0, < --size; a\n"
"                     multiple of 4096 with --odirect)\n"
"  --mmap             probe: read through mmap instead of read()\n"
"  --reread-after FILE  probe: read again on the same fd once FILE exists\n"
"  --file REL         probe: the file to load, relative to --dir (it must\n"
"                     hold the block of key --key-base)\n"
"  --report           vllm-load: a block that is absent (ENOENT) or\n"
"                     unreadable (EIO) is not a failure but reported on\n"
"                     stdout as \"<key> <step> enoent|eio\" (step: access,\n"
"                     open or read); any other outcome is still a failure\n"
"                     and is reported the same way (\"<key> read short <n>\",\n"
"                     \"<key> read wrong <offset>\", \"<key> <step> error\n"
"                     <ERRNO>\").  The summary line adds ok=N enoent=N eio=N.\n"
"  --same             vllm-load: every thread loads every key, all threads\n"
"                     the same key at once (they wait for each other before\n"
"                     each key): --threads loads per key\n"
"\n"
"Each phase prints one summary line on stdout:\n"
"  <command> <phase>: ops=N bytes=N errors=N ... secs=S MiB/s=R\n"
"Exit: 0 ok, 1 a check failed (details on stderr: path and offset), 2 usage.\n";

/* ------------------------------------------------------------------ */
/* options and global state                                           */

static struct {
	const char *cmd;
	const char *dir;
	const char *model;
	uint64_t blocks, key_base, version, progress, seed;
	int version_set, size_set;
	int threads, writers, readers, rounds;
	size_t size, chunk;
	int odirect; /* -1: command default */
	int no_rename, stop_on_enospc, keep_going, no_tmp;
	long long expect, min;
	uint64_t offset;
	int mmap, report, same;
	const char *reread_after, *file;
} O = {
	.model = "kvclient-model",
	.blocks = 64,
	.version = 1,
	.threads = 16,
	.writers = 2,
	.readers = 4,
	.rounds = 20,
	.size = 2u << 20,
	.chunk = 1u << 20,
	.odirect = -1,
	.expect = -1,
	.min = -1,
};

static atomic_ullong g_failures;
static atomic_int g_stop;
static atomic_int g_enospc_seen;
static pthread_mutex_t g_out_mu = PTHREAD_MUTEX_INITIALIZER;

struct counters {
	atomic_ullong ops, bytes, stored, skipped, misses, touched, tmps;
};

static void failf(const char *path, long long off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void failf(const char *path, long long off, const char *fmt, ...)
{
	unsigned long long n = atomic_fetch_add(&g_failures, 1);
	va_list ap;

	if (!O.keep_going)
		atomic_store(&g_stop, 1);
	if (n > MAX_SHOWN_FAILURES)
		return;
	pthread_mutex_lock(&g_out_mu);
	if (n == MAX_SHOWN_FAILURES) {
		fprintf(stderr, "kvclient %s: further failures not shown\n",
			O.cmd);
	} else {
		fprintf(stderr, "kvclient %s: FAIL %s: offset %lld: ", O.cmd,
			path, off);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fflush(stderr);
	pthread_mutex_unlock(&g_out_mu);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kvclient: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int stopped(void)
{
	return atomic_load(&g_stop);
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */
/* deterministic block contents                                       */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t hdr_check(uint64_t key, uint64_t ver, uint64_t size)
{
	return mix64(key ^ mix64(ver + GOLDEN) ^ mix64(size ^ HDR_MAGIC));
}

static uint64_t stream_seed(uint64_t key, uint64_t ver)
{
	return mix64(key * GOLDEN + 0x1234567) ^ mix64(ver ^ HDR_MAGIC);
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* The expected 8-byte word at file offset 8*w (little-endian value). */
static uint64_t block_word(uint64_t w, uint64_t key, uint64_t ver,
			   uint64_t size, uint64_t seed)
{
	switch (w) {
	case 0: return key;
	case 1: return ver;
	case 2: return size;
	case 3: return hdr_check(key, ver, size);
	default: return mix64(seed + (w + 1) * GOLDEN);
	}
}

static void fill_block(unsigned char *buf, uint64_t size, uint64_t key,
		       uint64_t ver)
{
	uint64_t seed = stream_seed(key, ver);
	uint64_t w, nw = size / 8;
	unsigned char tmp[8];

	for (w = 0; w < nw; w++) {
		uint64_t v = block_word(w, key, ver, size, seed);

		if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
			memcpy(buf + 8 * w, &v, 8);
		else
			put64(buf + 8 * w, v);
	}
	if (size % 8) {
		put64(tmp, block_word(nw, key, ver, size, seed));
		memcpy(buf + 8 * nw, tmp, size % 8);
	}
}

/*
 * Compare buf[0..len) with the expected bytes at file offsets off..off+len
 * of block (key, ver, size).  Returns -1 if equal, else the file offset of
 * the first differing byte.
 */
static long long check_range(const unsigned char *buf, uint64_t off,
			     uint64_t len, uint64_t key, uint64_t ver,
			     uint64_t size)
{
	uint64_t seed = stream_seed(key, ver);
	uint64_t pos = off, end = off + len;

	while (pos < end) {
		uint64_t w = pos / 8, in = pos % 8;
		uint64_t n = 8 - in;
		unsigned char exp[8];

		if (n > end - pos)
			n = end - pos;
		put64(exp, block_word(w, key, ver, size, seed));
		if (in == 0 && n == 8 &&
		    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
			/* fast path */
			uint64_t got, want = block_word(w, key, ver, size, seed);

			memcpy(&got, buf + (pos - off), 8);
			if (got == want) {
				pos += 8;
				continue;
			}
		}
		for (uint64_t i = 0; i < n; i++)
			if (buf[pos - off + i] != exp[in + i])
				return (long long)(pos + i);
		pos += n;
	}
	return -1;
}

struct hdr {
	uint64_t key, ver, size;
	int valid;
};

static struct hdr parse_hdr(const unsigned char *buf, size_t len)
{
	struct hdr h = { 0, 0, 0, 0 };

	if (len < HDR_LEN)
		return h;
	h.key = get64(buf);
	h.ver = get64(buf + 8);
	h.size = get64(buf + 16);
	h.valid = get64(buf + 24) == hdr_check(h.key, h.ver, h.size) &&
		  h.ver >= 1 && h.size >= HDR_LEN;
	return h;
}

/*
 * Check that buf[0..len) (a whole file, as read) is one complete valid block.
 * want_key: expected key (or UINT64_MAX: take it from the header).
 * want_ver: expected version (0 = any, reported in *got_ver).
 * want_size: expected length (0 = the header's).
 * Reports a failure and returns -1, else returns 0.
 */
static int check_whole(const char *path, const unsigned char *buf, size_t len,
		       uint64_t want_key, uint64_t want_ver, uint64_t want_size,
		       uint64_t *got_key, uint64_t *got_ver)
{
	struct hdr h = parse_hdr(buf, len);
	long long bad;

	if (want_size && len != want_size) {
		failf(path, (long long)len, "length %zu, expected %" PRIu64
		      " (%s)", len, want_size,
		      len < want_size ? "torn/short" : "too long");
		return -1;
	}
	if (!h.valid) {
		if (want_key != UINT64_MAX) {
			uint64_t v = want_ver ? want_ver : 1;

			bad = check_range(buf, 0, len < HDR_LEN ? len : HDR_LEN,
					  want_key, v, want_size ? want_size : len);
			failf(path, bad < 0 ? 0 : bad,
			      "block header is not valid (torn or foreign data)");
		} else {
			failf(path, 0,
			      "block header is not valid (torn or foreign data)");
		}
		return -1;
	}
	if (want_key != UINT64_MAX && h.key != want_key) {
		failf(path, 0, "holds key %" PRIu64 ", expected key %" PRIu64,
		      h.key, want_key);
		return -1;
	}
	if (want_ver && h.ver != want_ver) {
		failf(path, 8, "holds version %" PRIu64 ", expected version %"
		      PRIu64, h.ver, want_ver);
		return -1;
	}
	if (h.size != len) {
		failf(path, (long long)(len < h.size ? len : h.size),
		      "length %zu but header (version %" PRIu64 ") says %" PRIu64
		      " (%s)", len, h.ver, h.size,
		      len < h.size ? "torn/short" : "too long");
		return -1;
	}
	bad = check_range(buf, 0, len, h.key, h.ver, h.size);
	if (bad >= 0) {
		failf(path, bad, "data differs from key %" PRIu64 " version %"
		      PRIu64 " (%zu-byte block)", h.key, h.ver, len);
		return -1;
	}
	if (got_key)
		*got_key = h.key;
	if (got_ver)
		*got_ver = h.ver;
	return 0;
}

/* ------------------------------------------------------------------ */
/* names                                                              */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static void key_hash64(uint64_t key, char out[65])
{
	for (int i = 0; i < 4; i++)
		snprintf(out + 16 * i, 17, "%016" PRIx64,
			 mix64(key * 0xd1342543de82ef95ULL + (uint64_t)i * GOLDEN
			       + 0x5bd1e995));
}

/* <dir>/<model>_<12hex>_r0/<h[:3]>/<h[3:5]>_g0/<h>.bin */
static void vllm_path(char *out, size_t n, uint64_t key)
{
	char h[65];

	key_hash64(key, h);
	snprintf(out, n, "%s/%s_%012" PRIx64 "_r0/%.3s/%.2s_g0/%s.bin", O.dir,
		 O.model, fnv1a(O.model) & (uint64_t)0xffffffffffff, h, h + 3, h);
}

static void pt_name(char *out, size_t n, uint64_t key)
{
	snprintf(out, n, "kv-%016" PRIx64 ".pt", key);
}

static void pt_path(char *out, size_t n, uint64_t key)
{
	char name[64];

	pt_name(name, sizeof(name), key);
	snprintf(out, n, "%s/%s", O.dir, name);
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

static int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	p = strrchr(buf, '/');
	if (!p)
		return 0;
	*p = '\0';
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* buffers, I/O helpers                                               */

static unsigned char *alloc_buf(size_t len)
{
	void *p;
	size_t n = (len + 2 * ALIGN) / ALIGN * ALIGN;

	if (posix_memalign(&p, ALIGN, n))
		die("out of memory (%zu bytes)", n);
	memset(p, 0, n);
	return p;
}

static uint64_t rng_next(uint64_t *s)
{
	*s += GOLDEN;
	return mix64(*s);
}

static uint64_t thread_seed(int idx)
{
	uint64_t s = O.seed;

	if (!s) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
		    ((uint64_t)getpid() << 16);
	}
	return mix64(s + (uint64_t)idx * 0x632be59bd9b4e019ULL);
}

static int dflag(void)
{
	return O.odirect > 0 ? O_DIRECT : 0;
}

static void progress_tick(struct counters *c)
{
	unsigned long long n = atomic_fetch_add(&c->stored, 1) + 1;

	if (O.progress && n % O.progress == 0) {
		pthread_mutex_lock(&g_out_mu);
		printf("progress %llu\n", n);
		fflush(stdout);
		pthread_mutex_unlock(&g_out_mu);
	}
}

/*
 * A store step failed with errno e.  With --stop-on-enospc an ENOSPC ends
 * the run: the name must not have appeared.  Returns 1 if handled as ENOSPC.
 */
static int store_enospc(const char *dest, int e)
{
	if (!O.stop_on_enospc || e != ENOSPC)
		return 0;
	if (access(dest, F_OK) == 0)
		failf(dest, 0, "store failed with ENOSPC but the name exists");
	else if (errno != ENOENT)
		failf(dest, 0, "access after ENOSPC: %s (expected ENOENT)",
		      strerror(errno));
	if (atomic_fetch_add(&g_enospc_seen, 1) == 0) {
		pthread_mutex_lock(&g_out_mu);
		printf("enospc %s\n", dest);
		fflush(stdout);
		pthread_mutex_unlock(&g_out_mu);
	}
	atomic_store(&g_stop, 1);
	return 1;
}

/*
 * write() the whole buffer with one call (vLLM) or in chunks.  On a short
 * write, one more write of the rest is made to learn the errno.
 * Returns 0 or an errno.
 */
static int write_block(int fd, const unsigned char *buf, size_t len,
		       size_t chunk, size_t *done)
{
	size_t off = 0;

	*done = 0;
	while (off < len) {
		size_t n = chunk && chunk < len - off ? chunk : len - off;
		ssize_t r = write(fd, buf + off, n);

		if (r < 0)
			return errno ? errno : EIO;
		off += (size_t)r;
		*done = off;
		if ((size_t)r < n) {
			r = write(fd, buf + off, len - off);
			if (r < 0)
				return errno ? errno : EIO;
			return EIO; /* short write, no error reported */
		}
	}
	return 0;
}

static const char *errname(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case ENOSPC: return "ENOSPC";
	case EINVAL: return "EINVAL";
	case ENOTCONN: return "ENOTCONN";
	case EEXIST: return "EEXIST";
	case EACCES: return "EACCES";
	case EROFS: return "EROFS";
	case ESTALE: return "ESTALE";
	case EBUSY: return "EBUSY";
	case EPERM: return "EPERM";
	case EBADF: return "EBADF";
	case EFAULT: return "EFAULT";
	case ENXIO: return "ENXIO";
	case ENODATA: return "ENODATA";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EOVERFLOW: return "EOVERFLOW";
	case EAGAIN: return "EAGAIN";
	case EINTR: return "EINTR";
	case ENOMEM: return "ENOMEM";
	case ENODEV: return "ENODEV";
	case ECONNABORTED: return "ECONNABORTED";
	default: return strerror(e);
	}
}

/* ------------------------------------------------------------------ */
/* thread pool                                                        */

struct worker {
	int idx;
	pthread_t tid;
	struct counters *c;
	void *(*fn)(void *);
};

static atomic_ullong g_next;

/* Next key index to work on, or -1 when done. */
static long long next_index(void)
{
	unsigned long long i;

	if (stopped())
		return -1;
	i = atomic_fetch_add(&g_next, 1);
	return i < O.blocks ? (long long)i : -1;
}

static void run_threads(int n, void *(*fn)(void *), struct counters *c)
{
	struct worker *w = calloc((size_t)n, sizeof(*w));
	int i;

	if (!w)
		die("out of memory");
	atomic_store(&g_next, 0);
	for (i = 0; i < n; i++) {
		w[i].idx = i;
		w[i].c = c;
		w[i].fn = fn;
		if (pthread_create(&w[i].tid, NULL, fn, &w[i]))
			die("pthread_create failed");
	}
	for (i = 0; i < n; i++)
		pthread_join(w[i].tid, NULL);
	free(w);
}

static void summary(const char *phase, struct counters *c, double t0,
		    const char *extra)
{
	double secs = now_sec() - t0;
	unsigned long long bytes = atomic_load(&c->bytes);

	printf("%s %s: ops=%llu bytes=%llu errors=%llu%s%s secs=%.2f MiB/s=%.1f\n",
	       O.cmd, phase, atomic_load(&c->ops), bytes,
	       atomic_load(&g_failures), extra && *extra ? " " : "",
	       extra ? extra : "", secs,
	       secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0);
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* vLLM                                                               */

static int odirect_probe(void)
{
	char path[PATH_MAX];
	unsigned char *buf = alloc_buf(ALIGN);
	int fd, rc = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/.o_direct_probe_%d.tmp", O.dir,
		 (int)getpid());
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		failf(path, 0, "O_DIRECT probe: open: %s", errname(errno));
		goto out;
	}
	memset(buf, 0x5a, ALIGN);
	n = write(fd, buf, ALIGN);
	if (n != ALIGN) {
		failf(path, n > 0 ? n : 0, "O_DIRECT probe: write 4096: %s",
		      n < 0 ? errname(errno) : "short write");
		close(fd);
		unlink(path);
		goto out;
	}
	if (close(fd) < 0) {
		failf(path, 0, "O_DIRECT probe: close: %s", errname(errno));
		unlink(path);
		goto out;
	}
	if (unlink(path) < 0) {
		failf(path, 0, "O_DIRECT probe: unlink: %s", errname(errno));
		goto out;
	}
	if (access(path, F_OK) == 0 || errno != ENOENT) {
		failf(path, 0, "O_DIRECT probe: name still visible after unlink");
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static void *vllm_store_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	uint64_t suffix = rng_next(&rs) >> 1; /* u63, reused per thread */
	char dest[PATH_MAX], tmp[PATH_MAX + 32];
	long long i;

	while ((i = next_index()) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		size_t done;
		int fd, e;

		vllm_path(dest, sizeof(dest), key);
		atomic_fetch_add(&c->ops, 1);
		if (access(dest, F_OK) == 0) {
			atomic_fetch_add(&c->skipped, 1);
			continue;
		}
		if (errno != ENOENT) {
			failf(dest, 0, "access(F_OK): %s", errname(errno));
			continue;
		}
		if (mkdir_parents(dest) < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(dest, 0, "mkdir -p parent: %s", errname(e));
			continue;
		}
		if (O.no_rename)
			suffix = rng_next(&rs) >> 1;
		snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", dest, suffix);
		fill_block(buf, O.size, key, O.version);
		fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | dflag(),
			  0644);
		if (fd < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(tmp, 0, "open(O_CREAT|O_EXCL%s): %s",
				      dflag() ? "|O_DIRECT" : "", errname(e));
			continue;
		}
		e = write_block(fd, buf, O.size, 0, &done);
		if (e) {
			close(fd);
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(tmp, (long long)done,
				      "write of %zu bytes: %s after %zu bytes",
				      O.size, errname(e), done);
			continue;
		}
		atomic_fetch_add(&c->bytes, O.size);
		if (close(fd) < 0) {
			e = errno;
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(tmp, 0, "close: %s", errname(e));
			continue;
		}
		if (O.no_rename) {
			atomic_fetch_add(&c->tmps, 1);
			continue;
		}
		if (rename(tmp, dest) < 0) {
			e = errno;
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(dest, 0, "rename from %s: %s", tmp,
				      errname(e));
			continue;
		}
		progress_tick(c);
	}
	free(buf);
	return NULL;
}

/*
 * The outcome of one load of a block, as a client sees it.  A load either
 * returns every byte right (OC_OK) or fails with ENOENT or EIO; a short
 * count, wrong bytes or another errno is never an acceptable answer.
 */
enum outcome { OC_OK, OC_ENOENT, OC_EIO, OC_SHORT, OC_WRONG, OC_SIGBUS,
	       OC_ERROR };

struct load_res {
	enum outcome oc;
	long long val;    /* OC_SHORT: bytes read; OC_WRONG, OC_SIGBUS: offset */
	const char *step; /* "access", "open", "read", "mmap", "close" */
	int err;          /* errno of OC_ENOENT, OC_EIO, OC_ERROR */
};

static struct load_res res_errno(const char *step, int e)
{
	struct load_res r = { OC_ERROR, 0, step, e };

	if (e == ENOENT)
		r.oc = OC_ENOENT;
	else if (e == EIO)
		r.oc = OC_EIO;
	return r;
}

/* The outcome word(s) printed by probe: "ok", "short 4096", ... */
static void res_word(const struct load_res *r, char *out, size_t n)
{
	switch (r->oc) {
	case OC_OK: snprintf(out, n, "ok"); break;
	case OC_ENOENT: snprintf(out, n, "enoent"); break;
	case OC_EIO: snprintf(out, n, "eio"); break;
	case OC_SHORT: snprintf(out, n, "short %lld", r->val); break;
	case OC_WRONG: snprintf(out, n, "wrong %lld", r->val); break;
	case OC_SIGBUS: snprintf(out, n, "sigbus %lld", r->val); break;
	case OC_ERROR: snprintf(out, n, "error %s", errname(r->err)); break;
	}
}

/* A sentence for a failure message. */
static void res_msg(const struct load_res *r, uint64_t len, char *out,
		    size_t n)
{
	const char *d = dflag() ? "|O_DIRECT" : "";

	switch (r->oc) {
	case OC_OK:
		snprintf(out, n, "ok");
		break;
	case OC_SHORT:
		snprintf(out, n, "short read: %lld of %" PRIu64 " bytes",
			 r->val, len);
		break;
	case OC_WRONG:
		snprintf(out, n, "wrong data (first wrong byte at file offset "
			 "%lld)", r->val);
		break;
	case OC_SIGBUS:
		snprintf(out, n, "SIGBUS reading the mapping at file offset "
			 "%lld", r->val);
		break;
	default:
		if (!strcmp(r->step, "access"))
			snprintf(out, n, "lookup access(F_OK): %s",
				 errname(r->err));
		else if (!strcmp(r->step, "open"))
			snprintf(out, n, "open(O_RDONLY%s): %s",
				 O.mmap ? "" : d, errname(r->err));
		else if (!strcmp(r->step, "read"))
			snprintf(out, n, "read of %" PRIu64 " bytes: %s", len,
				 errname(r->err));
		else
			snprintf(out, n, "%s: %s", r->step, errname(r->err));
		break;
	}
}

/* Read [off, O.size) of block @key on @fd with ONE call (read() at offset
 * 0, as vLLM does; pread() otherwise) and compare. */
static struct load_res read_check(int fd, uint64_t key, unsigned char *buf,
				  uint64_t off, int use_pread)
{
	struct load_res r = { OC_OK, 0, "read", 0 };
	uint64_t len = O.size - off;
	long long bad;
	ssize_t n;

	memset(buf, 0xee, len);
	if (use_pread || off)
		n = pread(fd, buf, len, (off_t)off);
	else
		n = read(fd, buf, len);
	if (n < 0)
		return res_errno("read", errno);
	if ((uint64_t)n < len) {
		r.oc = OC_SHORT;
		r.val = n;
		return r;
	}
	bad = check_range(buf, off, len, key, O.version, O.size);
	if (bad >= 0) {
		r.oc = OC_WRONG;
		r.val = bad;
	}
	return r;
}

static sigjmp_buf g_bus_jmp;
static volatile sig_atomic_t g_bus_armed;

static void on_sigbus(int sig)
{
	(void)sig;
	if (g_bus_armed)
		siglongjmp(g_bus_jmp, 1);
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

/* Copy [off, O.size) of the block out of a shared read-only mapping. */
static struct load_res mmap_check(int fd, uint64_t key, unsigned char *buf,
				  uint64_t off)
{
	struct load_res r = { OC_OK, 0, "mmap", 0 };
	volatile uint64_t pos = off;
	unsigned char *m;
	long long bad;

	m = mmap(NULL, O.size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return res_errno("mmap", errno);
	signal(SIGBUS, on_sigbus);
	if (sigsetjmp(g_bus_jmp, 1) == 0) {
		g_bus_armed = 1;
		/* page by page, so that a SIGBUS names its page */
		while (pos < O.size) {
			uint64_t n = O.size - pos < ALIGN ? O.size - pos : ALIGN;

			memcpy(buf + (pos - off), m + pos, n);
			pos += n;
		}
		g_bus_armed = 0;
	} else {
		g_bus_armed = 0;
		munmap(m, O.size);
		r.oc = OC_SIGBUS;
		r.val = (long long)pos;
		return r;
	}
	munmap(m, O.size);
	bad = check_range(buf, off, O.size - off, key, O.version, O.size);
	if (bad >= 0) {
		r.oc = OC_WRONG;
		r.val = bad;
	}
	return r;
}

/*
 * One load of block @key at @path: access(F_OK), open, one read from @off
 * (or through mmap with --mmap), compare.  With @fdp the fd stays open and
 * is returned there (-1 if the open failed); else it is closed.
 */
static struct load_res load_once(const char *path, uint64_t key,
				 unsigned char *buf, uint64_t off, int *fdp)
{
	struct load_res r;
	int fd;

	if (fdp)
		*fdp = -1;
	if (access(path, F_OK) < 0)
		return res_errno("access", errno);
	fd = open(path, O_RDONLY | (O.mmap ? 0 : dflag()));
	if (fd < 0)
		return res_errno("open", errno);
	if (O.mmap)
		r = mmap_check(fd, key, buf, off);
	else
		r = read_check(fd, key, buf, off, 0);
	if (fdp) {
		*fdp = fd;
	} else if (close(fd) < 0 && r.oc == OC_OK) {
		r = res_errno("close", errno);
	}
	return r;
}

static struct {
	atomic_ullong ok, enoent, eio;
} g_report;

static pthread_barrier_t g_same_barrier;

/* The next key index for this thread: the shared counter, or with --same
 * every index in turn, after all threads are ready for it. */
static long long next_load_index(long long *mine)
{
	if (!O.same)
		return next_index();
	if (++*mine >= (long long)O.blocks)
		return -1;
	pthread_barrier_wait(&g_same_barrier);
	return *mine;
}

static void *vllm_load_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	char path[PATH_MAX], msg[200];
	long long i, mine = -1;

	while ((i = next_load_index(&mine)) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		struct load_res r;

		vllm_path(path, sizeof(path), key);
		atomic_fetch_add(&c->ops, 1);
		r = load_once(path, key, buf, 0, NULL);
		if (r.oc == OC_OK) {
			atomic_fetch_add(&c->bytes, O.size);
			atomic_fetch_add(&g_report.ok, 1);
			continue;
		}
		if (O.report) {
			res_word(&r, msg, sizeof(msg));
			pthread_mutex_lock(&g_out_mu);
			printf("%" PRIu64 " %s %s\n", key, r.step, msg);
			pthread_mutex_unlock(&g_out_mu);
			if (r.oc == OC_ENOENT) {
				atomic_fetch_add(&g_report.enoent, 1);
				continue;
			}
			if (r.oc == OC_EIO) {
				atomic_fetch_add(&g_report.eio, 1);
				continue;
			}
		}
		if (r.oc == OC_WRONG) {
			/* the detailed account: header, key, version, offset */
			check_whole(path, buf, O.size, key, O.version, O.size,
				    NULL, NULL);
			continue;
		}
		res_msg(&r, O.size, msg, sizeof(msg));
		failf(path, r.oc == OC_SHORT ? r.val : 0, "%s", msg);
	}
	free(buf);
	return NULL;
}

static int cmd_vllm_store(void)
{
	struct counters c = { 0 };
	char extra[160];
	double t0 = now_sec();

	if (O.odirect > 0 && odirect_probe() < 0)
		return 1;
	run_threads(O.threads, vllm_store_thread, &c);
	snprintf(extra, sizeof(extra), "stored=%llu skipped=%llu tmp_left=%llu",
		 atomic_load(&c.stored), atomic_load(&c.skipped),
		 atomic_load(&c.tmps));
	summary("store", &c, t0, extra);
	return 0;
}

static int cmd_vllm_load(void)
{
	struct counters c = { 0 };
	char extra[160];
	double t0 = now_sec();

	if (O.same &&
	    pthread_barrier_init(&g_same_barrier, NULL, (unsigned)O.threads))
		die("pthread_barrier_init failed");
	run_threads(O.threads, vllm_load_thread, &c);
	if (O.same)
		pthread_barrier_destroy(&g_same_barrier);
	snprintf(extra, sizeof(extra), "ok=%llu enoent=%llu eio=%llu",
		 atomic_load(&g_report.ok), atomic_load(&g_report.enoent),
		 atomic_load(&g_report.eio));
	summary("load", &c, t0, O.report ? extra : NULL);
	return 0;
}

/* ------------------------------------------------------------------ */
/* probe, paths                                                       */

static void probe_print(const char *path, const struct load_res *r)
{
	char word[64], msg[200];

	res_word(r, word, sizeof(word));
	printf("%s\n", word);
	fflush(stdout);
	if (r->oc != OC_OK) {
		res_msg(r, O.size - O.offset, msg, sizeof(msg));
		fprintf(stderr, "kvclient probe: %s: %s\n", path, msg);
	}
}

static int cmd_probe(void)
{
	unsigned char *buf = alloc_buf(O.size);
	uint64_t key = O.key_base;
	char path[PATH_MAX];
	struct load_res r;
	int fd, bad;

	if (O.file)
		snprintf(path, sizeof(path), "%s/%s", O.dir, O.file);
	else
		vllm_path(path, sizeof(path), key);
	r = load_once(path, key, buf, O.offset, O.reread_after ? &fd : NULL);
	probe_print(path, &r);
	bad = r.oc != OC_OK;
	if (O.reread_after && fd >= 0) {
		double t0 = now_sec();

		while (access(O.reread_after, F_OK) < 0) {
			if (now_sec() - t0 > 120)
				die("probe: %s did not appear within 120 s",
				    O.reread_after);
			usleep(10000);
		}
		if (O.mmap)
			r = mmap_check(fd, key, buf, O.offset);
		else
			r = read_check(fd, key, buf, O.offset, 1);
		probe_print(path, &r);
		bad |= r.oc != OC_OK;
		if (close(fd) < 0)
			fprintf(stderr, "kvclient probe: %s: close: %s\n", path,
				errname(errno));
	} else if (O.reread_after) {
		printf("not-opened\n");
		bad = 1;
	}
	free(buf);
	return bad;
}

static int cmd_paths(void)
{
	char path[PATH_MAX];
	size_t skip = strlen(O.dir) + 1;

	for (uint64_t i = 0; i < O.blocks; i++) {
		vllm_path(path, sizeof(path), O.key_base + i);
		printf("%s\n", path + skip);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* llm-d                                                              */

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	if (a->tv_nsec != b->tv_nsec)
		return a->tv_nsec < b->tv_nsec ? -1 : 1;
	return 0;
}

static void llmd_touch(const char *dest, struct counters *c)
{
	struct stat before, after;
	struct timespec t0, tv[2];

	if (stat(dest, &before) < 0) {
		failf(dest, 0, "stat after probe open: %s", errname(errno));
		return;
	}
	clock_gettime(CLOCK_REALTIME, &t0);
	tv[0].tv_sec = 0;
	tv[0].tv_nsec = UTIME_NOW;
	tv[1].tv_sec = 0;
	tv[1].tv_nsec = UTIME_OMIT;
	if (utimensat(AT_FDCWD, dest, tv, 0) < 0) {
		failf(dest, 0, "utimensat(atime=NOW, mtime=OMIT): %s",
		      errname(errno));
		return;
	}
	if (stat(dest, &after) < 0) {
		failf(dest, 0, "stat after utimensat: %s", errname(errno));
		return;
	}
	if (ts_cmp(&before.st_mtim, &after.st_mtim) != 0)
		failf(dest, 0, "utimensat(mtime=OMIT) changed mtime %lld.%09ld"
		      " -> %lld.%09ld", (long long)before.st_mtim.tv_sec,
		      before.st_mtim.tv_nsec, (long long)after.st_mtim.tv_sec,
		      after.st_mtim.tv_nsec);
	/* second granularity: the daemon may not keep nanoseconds */
	if (after.st_atim.tv_sec < t0.tv_sec)
		failf(dest, 0, "utimensat(atime=NOW) did not move atime: "
		      "before %lld, after %lld, call at %lld",
		      (long long)before.st_atim.tv_sec,
		      (long long)after.st_atim.tv_sec, (long long)t0.tv_sec);
	if (after.st_size != (off_t)O.size)
		failf(dest, (long long)after.st_size,
		      "existing block has size %lld, expected %zu",
		      (long long)after.st_size, O.size);
	atomic_fetch_add(&c->touched, 1);
}

static void *llmd_store_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	char dest[PATH_MAX], tmp[PATH_MAX + 32];
	long long i;

	while ((i = next_index()) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		size_t done;
		int fd, e;

		vllm_path(dest, sizeof(dest), key);
		atomic_fetch_add(&c->ops, 1);
		/* ifstream(dest).good() */
		fd = open(dest, O_RDONLY);
		if (fd >= 0) {
			close(fd);
			atomic_fetch_add(&c->skipped, 1);
			llmd_touch(dest, c);
			continue;
		}
		if (errno != ENOENT) {
			failf(dest, 0, "probe open(O_RDONLY): %s", errname(errno));
			continue;
		}
		if (mkdir_parents(dest) < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(dest, 0, "mkdir -p parent: %s", errname(e));
			continue;
		}
		snprintf(tmp, sizeof(tmp), "%s_%" PRIu32 ".tmp", dest,
			 (uint32_t)rng_next(&rs));
		fill_block(buf, O.size, key, O.version);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | dflag(), 0644);
		if (fd < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(tmp, 0, "open(O_WRONLY|O_CREAT|O_TRUNC): %s",
				      errname(e));
			continue;
		}
		e = write_block(fd, buf, O.size, O.chunk, &done);
		if (e) {
			close(fd);
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(tmp, (long long)done, "write: %s",
				      errname(e));
			continue;
		}
		atomic_fetch_add(&c->bytes, O.size);
		/* rename while the fd is still open, close afterwards */
		if (rename(tmp, dest) < 0) {
			e = errno;
			close(fd);
			unlink(tmp);
			if (!store_enospc(dest, e))
				failf(dest, 0, "rename (fd open) from %s: %s", tmp,
				      errname(e));
			continue;
		}
		if (close(fd) < 0) {
			e = errno;
			if (!store_enospc(dest, e))
				failf(dest, 0, "close after rename: %s",
				      errname(e));
			continue;
		}
		progress_tick(c);
	}
	free(buf);
	return NULL;
}

static int llmd_pread_check(int fd, const char *path, unsigned char *buf,
			    uint64_t key, uint64_t off, uint64_t len,
			    struct counters *c)
{
	ssize_t n;
	long long bad;

	n = pread(fd, buf, len, (off_t)off);
	if (n < 0) {
		failf(path, (long long)off, "pread of %" PRIu64 " bytes: %s",
		      len, errname(errno));
		return -1;
	}
	if ((uint64_t)n != len) {
		failf(path, (long long)off + n, "short pread: %zd of %" PRIu64
		      " bytes at offset %" PRIu64, n, len, off);
		return -1;
	}
	atomic_fetch_add(&c->bytes, (unsigned long long)n);
	bad = check_range(buf, off, len, key, O.version, O.size);
	if (bad >= 0) {
		failf(path, bad, "tail data differs from key %" PRIu64
		      " version %" PRIu64, key, O.version);
		return -1;
	}
	return 0;
}

static void *llmd_load_thread(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	char path[PATH_MAX];
	long long i;

	while ((i = next_index()) >= 0) {
		uint64_t key = O.key_base + (uint64_t)i;
		uint64_t sz = O.size, offs[8], lens[8];
		int fd, k, n = 0;
		off_t end;
		ssize_t r;

		vllm_path(path, sizeof(path), key);
		atomic_fetch_add(&c->ops, 1);
		fd = open(path, O_RDONLY | dflag());
		if (fd < 0) {
			failf(path, 0, "open: %s", errname(errno));
			continue;
		}
		end = lseek(fd, 0, SEEK_END);
		if (end < 0) {
			failf(path, 0, "lseek(SEEK_END): %s", errname(errno));
			close(fd);
			continue;
		}
		if ((uint64_t)end != sz) {
			failf(path, (long long)end, "lseek(SEEK_END) = %lld, "
			      "expected %" PRIu64, (long long)end, sz);
			close(fd);
			continue;
		}
		/* the tail: second half, last page, last chunk, a random page */
		offs[n] = sz / 2 / ALIGN * ALIGN;
		lens[n++] = sz - offs[0];
		if (sz >= 2 * ALIGN) {
			offs[n] = sz - ALIGN;
			lens[n++] = ALIGN;
			offs[n] = (rng_next(&rs) % (sz / ALIGN - 1) + 1) * ALIGN;
			lens[n++] = ALIGN;
		}
		if (sz > O.chunk && O.chunk % ALIGN == 0) {
			offs[n] = sz - O.chunk;
			lens[n++] = O.chunk;
		}
		if (!dflag() && sz > 64) {
			/* unaligned tail reads (buffered only) */
			offs[n] = sz / 2 + 17;
			lens[n++] = sz - (sz / 2 + 17);
			offs[n] = sz - 1;
			lens[n++] = 1;
		}
		for (k = 0; k < n && !stopped(); k++)
			if (llmd_pread_check(fd, path, buf, key, offs[k], lens[k],
					     c) < 0)
				break;
		if (k == n) {
			/* reading at EOF returns 0 */
			r = pread(fd, buf, ALIGN, (off_t)sz);
			if (r != 0)
				failf(path, (long long)sz, "pread at EOF returned "
				      "%zd (%s), expected 0", r,
				      r < 0 ? errname(errno) : "data");
		}
		if (close(fd) < 0)
			failf(path, 0, "close: %s", errname(errno));
	}
	free(buf);
	return NULL;
}

static int cmd_llmd_store(const char *phase)
{
	struct counters c = { 0 };
	char extra[160];
	double t0 = now_sec();

	run_threads(O.threads, llmd_store_thread, &c);
	snprintf(extra, sizeof(extra), "stored=%llu present=%llu touched=%llu",
		 atomic_load(&c.stored), atomic_load(&c.skipped),
		 atomic_load(&c.touched));
	summary(phase, &c, t0, extra);
	return 0;
}

static int cmd_llmd_load(void)
{
	struct counters c = { 0 };
	double t0 = now_sec();

	run_threads(O.threads, llmd_load_thread, &c);
	summary("load", &c, t0, NULL);
	return 0;
}

static int cmd_llmd(void)
{
	cmd_llmd_store("store");
	if (atomic_load(&g_failures))
		return 0;
	cmd_llmd_store("store-again");
	if (atomic_load(&g_failures))
		return 0;
	return cmd_llmd_load();
}

/* ------------------------------------------------------------------ */
/* concurrent writers and readers of the same names: lmcache, race    */

static atomic_ullong *g_started;   /* per key: highest version begun */
static atomic_int *g_published;    /* per key: a store has completed */
static atomic_int g_writers_done;

static void atomic_max(atomic_ullong *a, unsigned long long v)
{
	unsigned long long cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static void key_path(char *out, size_t n, uint64_t key)
{
	if (strcmp(O.cmd, "lmcache") == 0)
		pt_path(out, n, key);
	else
		vllm_path(out, n, key);
}

static void *lmcache_writer(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	char path[PATH_MAX];

	for (int r = 0; r < O.rounds && !stopped(); r++) {
		uint64_t ver = O.version + (uint64_t)r;

		for (uint64_t i = (uint64_t)w->idx; i < O.blocks && !stopped();
		     i += (uint64_t)O.writers) {
			uint64_t key = O.key_base + i;
			size_t done;
			int fd, e;

			pt_path(path, sizeof(path), key);
			fill_block(buf, O.size, key, ver);
			atomic_max(&g_started[i], ver);
			atomic_fetch_add(&c->ops, 1);
			fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | dflag(),
				  0644);
			if (fd < 0) {
				e = errno;
				if (!store_enospc(path, e))
					failf(path, 0, "writer open(O_CREAT|"
					      "O_WRONLY|O_TRUNC): %s", errname(e));
				continue;
			}
			e = write_block(fd, buf, O.size, O.chunk, &done);
			if (e) {
				close(fd);
				if (!store_enospc(path, e))
					failf(path, (long long)done,
					      "writer write: %s", errname(e));
				continue;
			}
			if (close(fd) < 0) {
				e = errno;
				if (!store_enospc(path, e))
					failf(path, 0, "writer close: %s",
					      errname(e));
				continue;
			}
			atomic_fetch_add(&c->bytes, O.size);
			atomic_store(&g_published[i], 1);
			progress_tick(c);
		}
	}
	free(buf);
	return NULL;
}

static void *race_writer(void *arg)
{
	struct worker *w = arg;
	struct counters *c = w->c;
	unsigned char *buf = alloc_buf(O.size);
	uint64_t rs = thread_seed(w->idx);
	uint64_t suffix = rng_next(&rs) >> 1;
	char dest[PATH_MAX], tmp[PATH_MAX + 32];

	for (int r = 0; r < O.rounds && !stopped(); r++) {
		/* distinct per writer and round: 1..writers*rounds (+base) */
		uint64_t ver = O.version + (uint64_t)r * (uint64_t)O.writers +
			       (uint64_t)w->idx;

		for (uint64_t i = 0; i < O.blocks && !stopped(); i++) {
			uint64_t key = O.key_base + i;
			size_t done;
			int fd, e;

			vllm_path(dest, sizeof(dest), key);
			atomic_fetch_add(&c->ops, 1);
			if (mkdir_parents(dest) < 0) {
				failf(dest, 0, "mkdir -p parent: %s",
				      errname(errno));
				continue;
			}
			snprintf(tmp, sizeof(tmp), "%s_%" PRIu64 ".tmp", dest,
				 suffix);
			fill_block(buf, O.size, key, ver);
			atomic_max(&g_started[i], ver);
			fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC |
				  dflag(), 0644);
			if (fd < 0) {
				failf(tmp, 0, "open(O_CREAT|O_EXCL): %s",
				      errname(errno));
				continue;
			}
			e = write_block(fd, buf, O.size, 0, &done);
			if (e) {
				close(fd);
				unlink(tmp);
				failf(tmp, (long long)done, "write: %s",
				      errname(e));
				continue;
			}
			if (close(fd) < 0) {
				failf(tmp, 0, "close: %s", errname(errno));
				unlink(tmp);
				continue;
			}
			if (rename(tmp, dest) < 0) {
				failf(dest, 0, "rename over existing name from "
				      "%s: %s", tmp, errname(errno));
				unlink(tmp);
				continue;
			}
			atomic_fetch_add(&c->bytes, O.size);
			atomic_store(&g_published[i], 1);
			progress_tick(c);
		}
	}
	free(buf);
	return NULL;
}

struct rstats {
	atomic_ullong reads, hits, enoent, bytes;
};
static struct rstats g_rs;

/*
 * Read a whole file without knowing its size (LMCache readinto, then a
 * read to EOF).  Returns bytes read, -1 with errno on error.
 */
static ssize_t read_whole(int fd, unsigned char *buf, size_t cap)
{
	size_t got = 0;

	if (dflag())
		cap = (cap + ALIGN - 1) / ALIGN * ALIGN; /* alloc_buf has room */
	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (dflag() && got % ALIGN)
			break; /* O_DIRECT: a partial page means EOF */
	}
	return (ssize_t)got;
}

static void *reader_thread(void *arg)
{
	struct worker *w = arg;
	size_t cap = O.size + ALIGN;
	unsigned char *buf = alloc_buf(cap);
	uint64_t rs = thread_seed(1000 + w->idx);
	uint64_t *seen = calloc(O.blocks, sizeof(*seen));
	int lm = strcmp(O.cmd, "lmcache") == 0;
	char path[PATH_MAX];

	if (!seen)
		die("out of memory");
	while (!atomic_load(&g_writers_done) && !stopped()) {
		uint64_t i = rng_next(&rs) % O.blocks;
		uint64_t key = O.key_base + i, gk, gv;
		int was_published = atomic_load(&g_published[i]);
		int fd;
		ssize_t n;

		key_path(path, sizeof(path), key);
		atomic_fetch_add(&g_rs.reads, 1);
		fd = open(path, O_RDONLY | dflag());
		if (fd < 0) {
			int e = errno;

			if (e != ENOENT) {
				failf(path, 0, "reader open: %s", errname(e));
			} else if (!lm && was_published) {
				failf(path, 0, "reader open: ENOENT after the "
				      "name was published (rename over an "
				      "existing name must be atomic)");
			} else {
				atomic_fetch_add(&g_rs.enoent, 1);
			}
			continue;
		}
		n = read_whole(fd, buf, cap);
		if (n < 0) {
			failf(path, 0, "reader read: %s", errname(errno));
			close(fd);
			continue;
		}
		close(fd);
		if (check_whole(path, buf, (size_t)n, key, 0, O.size, &gk,
				&gv) < 0)
			continue;
		atomic_fetch_add(&g_rs.hits, 1);
		atomic_fetch_add(&g_rs.bytes, (unsigned long long)n);
		if (gv > atomic_load(&g_started[i]))
			failf(path, 8, "version %" PRIu64 " was never written "
			      "(highest begun %llu)", gv,
			      atomic_load(&g_started[i]));
		if (lm && gv < seen[i])
			failf(path, 8, "went back from version %" PRIu64
			      " to older version %" PRIu64, seen[i], gv);
		if (gv > seen[i])
			seen[i] = gv;
	}
	free(seen);
	free(buf);
	return NULL;
}

static int cmd_concurrent(void)
{
	struct counters c = { 0 };
	int lm = strcmp(O.cmd, "lmcache") == 0;
	int nw = O.writers, nr = O.readers, k;
	pthread_t *tw, *tr;
	struct worker *ww, *wr;
	unsigned char *buf;
	char extra[200], path[PATH_MAX];
	double t0 = now_sec();
	unsigned long long final_ok = 0;

	g_started = calloc(O.blocks, sizeof(*g_started));
	g_published = calloc(O.blocks, sizeof(*g_published));
	tw = calloc((size_t)nw, sizeof(*tw));
	tr = calloc((size_t)nr, sizeof(*tr));
	ww = calloc((size_t)nw, sizeof(*ww));
	wr = calloc((size_t)nr, sizeof(*wr));
	if (!g_started || !g_published || !tw || !tr || !ww || !wr)
		die("out of memory");
	/* start from nothing: versions left by an earlier run are unknown */
	for (uint64_t i = 0; i < O.blocks; i++) {
		key_path(path, sizeof(path), O.key_base + i);
		if (unlink(path) < 0 && errno != ENOENT)
			failf(path, 0, "unlink before the run: %s",
			      errname(errno));
	}
	for (k = 0; k < nr; k++) {
		wr[k].idx = k;
		wr[k].c = &c;
		if (pthread_create(&tr[k], NULL, reader_thread, &wr[k]))
			die("pthread_create failed");
	}
	for (k = 0; k < nw; k++) {
		ww[k].idx = k;
		ww[k].c = &c;
		if (pthread_create(&tw[k], NULL, lm ? lmcache_writer : race_writer,
				   &ww[k]))
			die("pthread_create failed");
	}
	for (k = 0; k < nw; k++)
		pthread_join(tw[k], NULL);
	atomic_store(&g_writers_done, 1);
	for (k = 0; k < nr; k++)
		pthread_join(tr[k], NULL);
	snprintf(extra, sizeof(extra),
		 "stores=%llu reads=%llu hits=%llu enoent=%llu read_bytes=%llu",
		 atomic_load(&c.stored), atomic_load(&g_rs.reads),
		 atomic_load(&g_rs.hits), atomic_load(&g_rs.enoent),
		 atomic_load(&g_rs.bytes));
	summary("write+read", &c, t0, extra);

	/* final state: every key present with a valid version */
	t0 = now_sec();
	buf = alloc_buf(O.size + ALIGN);
	for (uint64_t i = 0; i < O.blocks && !stopped(); i++) {
		uint64_t key = O.key_base + i, gk, gv;
		ssize_t n;
		int fd;

		key_path(path, sizeof(path), key);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			failf(path, 0, "final read: open: %s", errname(errno));
			continue;
		}
		n = read_whole(fd, buf, O.size + ALIGN);
		close(fd);
		if (n < 0) {
			failf(path, 0, "final read: %s", errname(errno));
			continue;
		}
		if (check_whole(path, buf, (size_t)n, key, 0, O.size, &gk, &gv))
			continue;
		if (lm && gv != O.version + (uint64_t)O.rounds - 1) {
			failf(path, 8, "final version %" PRIu64 ", expected the "
			      "last one written, %" PRIu64, gv,
			      O.version + (uint64_t)O.rounds - 1);
			continue;
		}
		final_ok++;
	}
	free(buf);
	printf("%s final: blocks=%llu ok=%llu errors=%llu secs=%.2f\n", O.cmd,
	       (unsigned long long)O.blocks, final_ok,
	       atomic_load(&g_failures), now_sec() - t0);
	fflush(stdout);
	free(tw);
	free(tr);
	free(ww);
	free(wr);
	return 0;
}

/* ------------------------------------------------------------------ */
/* verify                                                             */

static char **g_files;
static size_t g_nfiles, g_capfiles;
static unsigned long long g_tmp_found;

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
				failf(path, 0, "lstat of listed name: %s",
				      errname(errno));
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
			failf(path, 0, "open of listed name: %s", errname(errno));
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
			failf(path, 0, "read: %s", errname(errno));
			close(fd);
			continue;
		}
		close(fd);
		if (n != st.st_size) {
			failf(path, n, "read %zd bytes but st_size is %lld", n,
			      (long long)st.st_size);
			continue;
		}
		if (check_whole(path, buf, (size_t)n, UINT64_MAX,
				O.version_set ? O.version : 0,
				O.size_set ? O.size : 0, &key, &ver) < 0)
			continue;
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
			continue;
		}
		atomic_fetch_add(&c->bytes, (unsigned long long)n);
		atomic_fetch_add(&c->stored, 1);
	}
	free(buf);
	return NULL;
}

static int cmd_verify(void)
{
	struct counters c = { 0 };
	char extra[120];
	double t0 = now_sec();
	unsigned long long found;

	walk(O.dir);
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
	snprintf(extra, sizeof(extra), "blocks=%zu valid=%llu tmp=%llu",
		 g_nfiles, found, g_tmp_found);
	summary("verify", &c, t0, extra);
	for (size_t i = 0; i < g_nfiles; i++)
		free(g_files[i]);
	free(g_files);
	return 0;
}

/* ------------------------------------------------------------------ */
/* command line                                                       */

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kvclient: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: kvclient COMMAND --dir DIR [OPTIONS]"
		"  (kvclient --help for the list)\n");
	exit(2);
}

static uint64_t parse_num(const char *opt, const char *s, int allow_suffix)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	if (!s || !*s || *s == '-')
		usage_error("%s: expected a non-negative number, got '%s'", opt,
			    s ? s : "");
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		usage_error("%s: bad number '%s'", opt, s);
	if (*end && allow_suffix) {
		switch (*end) {
		case 'k': case 'K': mul = 1ULL << 10; break;
		case 'm': case 'M': mul = 1ULL << 20; break;
		case 'g': case 'G': mul = 1ULL << 30; break;
		default: usage_error("%s: bad size '%s'", opt, s);
		}
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	}
	if (*end)
		usage_error("%s: bad number '%s'", opt, s);
	if (v > UINT64_MAX / mul)
		usage_error("%s: number too large '%s'", opt, s);
	return v * mul;
}

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
	uint64_t v = parse_num(opt, s, 0);

	if (v < (uint64_t)lo || v > (uint64_t)hi)
		usage_error("%s: must be between %d and %d", opt, lo, hi);
	return (int)v;
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {
		"vllm-store", "vllm-load", "llmd-store", "llmd-load", "llmd",
		"lmcache", "race", "verify", "probe", "paths",
	};
	int i, rc, known = 0;
	struct stat st;

	if (argc < 2)
		usage_error("missing COMMAND");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	O.cmd = argv[1];
	for (i = 0; i < (int)(sizeof(cmds) / sizeof(cmds[0])); i++)
		if (!strcmp(O.cmd, cmds[i]))
			known = 1;
	if (!known)
		usage_error("unknown command '%s'", O.cmd);

	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = NULL;
		char name[64];
		const char *eq = strchr(a, '=');

		/* --opt VALUE and --opt=VALUE */
		if (strncmp(a, "--", 2) != 0)
			usage_error("unexpected argument '%s'", a);
		if (eq) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
			v = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", a);
		}
#define FLAG(s) (!strcmp(name, s) && !v)
#define ARG(s) (!strcmp(name, s) && (v || (i + 1 < argc && (v = argv[++i]))))
		if (FLAG("--odirect"))
			O.odirect = 1;
		else if (FLAG("--buffered"))
			O.odirect = 0;
		else if (FLAG("--no-rename"))
			O.no_rename = 1;
		else if (FLAG("--stop-on-enospc"))
			O.stop_on_enospc = 1;
		else if (FLAG("--keep-going"))
			O.keep_going = 1;
		else if (FLAG("--no-tmp"))
			O.no_tmp = 1;
		else if (FLAG("--mmap"))
			O.mmap = 1;
		else if (FLAG("--report"))
			O.report = 1;
		else if (FLAG("--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (ARG("--dir"))
			O.dir = v;
		else if (ARG("--model"))
			O.model = v;
		else if (ARG("--blocks"))
			O.blocks = parse_num(name, v, 0);
		else if (ARG("--key-base"))
			O.key_base = parse_num(name, v, 0);
		else if (ARG("--threads"))
			O.threads = parse_int(name, v, 1, 1024);
		else if (ARG("--writers"))
			O.writers = parse_int(name, v, 1, 1024);
		else if (ARG("--readers"))
			O.readers = parse_int(name, v, 0, 1024);
		else if (ARG("--rounds"))
			O.rounds = parse_int(name, v, 1, 1000000);
		else if (ARG("--size")) {
			O.size = parse_num(name, v, 1);
			O.size_set = 1;
		} else if (ARG("--chunk"))
			O.chunk = parse_num(name, v, 1);
		else if (ARG("--version")) {
			O.version = parse_num(name, v, 0);
			O.version_set = 1;
		} else if (ARG("--progress"))
			O.progress = parse_num(name, v, 0);
		else if (ARG("--seed"))
			O.seed = parse_num(name, v, 0);
		else if (ARG("--expect"))
			O.expect = (long long)parse_num(name, v, 0);
		else if (ARG("--min"))
			O.min = (long long)parse_num(name, v, 0);
		else if (ARG("--offset"))
			O.offset = parse_num(name, v, 1);
		else if (ARG("--reread-after"))
			O.reread_after = v;
		else if (ARG("--file"))
			O.file = v;
		else if (FLAG("--same"))
			O.same = 1;
		else
			usage_error("unknown option or missing value: '%s'", a);
#undef FLAG
#undef ARG
	}

	if (!O.dir)
		usage_error("--dir DIR is required");
	if (O.mmap && O.odirect > 0)
		usage_error("--mmap and --odirect exclude each other");
	if (O.odirect < 0)
		O.odirect = !strncmp(O.cmd, "vllm-", 5) ||
			    (!strcmp(O.cmd, "probe") && !O.mmap);
	/*
	 * Checkers report every bad block, and lmcache/race run all their
	 * rounds (so that the final state is checked too); the stores stop
	 * all threads at the first failure.
	 */
	if (!strcmp(O.cmd, "verify") || !strcmp(O.cmd, "vllm-load") ||
	    !strcmp(O.cmd, "llmd-load") || !strcmp(O.cmd, "lmcache") ||
	    !strcmp(O.cmd, "race"))
		O.keep_going = 1;
	if (O.size < HDR_LEN || O.size > (1ULL << 34))
		usage_error("--size must be between %d bytes and 16G", HDR_LEN);
	if (O.odirect && O.size % ALIGN && strcmp(O.cmd, "verify"))
		usage_error("--size must be a multiple of %d with --odirect",
			    ALIGN);
	if (O.chunk == 0 || (O.odirect && O.chunk % ALIGN))
		usage_error("--chunk must be > 0 (a multiple of %d with "
			    "--odirect)", ALIGN);
	if (O.version == 0)
		usage_error("--version must be >= 1");
	if (O.blocks == 0 && strcmp(O.cmd, "verify"))
		usage_error("--blocks must be >= 1");
	if (O.blocks > (1ULL << 32))
		usage_error("--blocks too large");
	if (O.no_rename && strcmp(O.cmd, "vllm-store"))
		usage_error("--no-rename is for vllm-store");
	if ((O.expect >= 0 || O.min >= 0 || O.no_tmp) && strcmp(O.cmd, "verify"))
		usage_error("--expect, --min and --no-tmp are for verify");
	if ((O.offset || O.mmap || O.reread_after || O.file) &&
	    strcmp(O.cmd, "probe"))
		usage_error("--offset, --mmap, --reread-after and --file are for "
			    "probe");
	if (O.offset >= O.size || (O.odirect && O.offset % ALIGN))
		usage_error("--offset must be below --size (a multiple of %d "
			    "with --odirect)", ALIGN);
	if ((O.report || O.same) && strcmp(O.cmd, "vllm-load"))
		usage_error("--report and --same are for vllm-load");
	if (stat(O.dir, &st) < 0 || !S_ISDIR(st.st_mode))
		usage_error("--dir %s: not a directory", O.dir);

	/* stdout carries progress lines that a test reads through a pipe */
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (!strcmp(O.cmd, "vllm-store"))
		rc = cmd_vllm_store();
	else if (!strcmp(O.cmd, "vllm-load"))
		rc = cmd_vllm_load();
	else if (!strcmp(O.cmd, "llmd-store"))
		rc = cmd_llmd_store("store");
	else if (!strcmp(O.cmd, "llmd-load"))
		rc = cmd_llmd_load();
	else if (!strcmp(O.cmd, "llmd"))
		rc = cmd_llmd();
	else if (!strcmp(O.cmd, "verify"))
		rc = cmd_verify();
	else if (!strcmp(O.cmd, "probe"))
		rc = cmd_probe();
	else if (!strcmp(O.cmd, "paths"))
		rc = cmd_paths();
	else
		rc = cmd_concurrent();

	if (O.stop_on_enospc && !atomic_load(&g_enospc_seen) &&
	    !atomic_load(&g_failures))
		failf(O.dir, 0, "--stop-on-enospc: no ENOSPC after %" PRIu64
		      " blocks", O.blocks);
	if (atomic_load(&g_failures)) {
		fprintf(stderr, "kvclient %s: %llu check(s) failed\n", O.cmd,
			atomic_load(&g_failures));
		return 1;
	}
	return rc;
}
