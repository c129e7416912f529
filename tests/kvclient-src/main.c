/*
 * kvclient: replay the file access patterns of LLM KV-cache clients (vLLM,
 * llm-d, LMCache; see docs CLIENTS.md) against a directory and check every
 * byte that is read back.
 *
 * This file: the usage text, the options and their defaults, the command
 * line and the dispatch to the commands; the exit status.  The block format
 * is described in block.c.
 *
 * Build (automake does it as tests/kvclient, check_PROGRAMS):
 *     cd tests/kvclient-src &&
 *     gcc -O2 -Wall -Wextra -Werror -pthread -o ../kvclient *.c
 *
 * Exit status: 0 all checks passed, 1 a check failed (each failure is
 * reported on stderr with the path and file offset), 2 usage error.
 */
#include "kvclient.h"

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
"               --manifest FILE: also every key FILE says was stored is\n"
"               there (its version or a later one), every key it says was\n"
"               removed is absent (or newer than the removal), and nothing\n"
"               but blocks and *.tmp names is in DIR.\n"
"  evict        unlink the blocks of keys BASE..BASE+N-1 (vLLM layout, or\n"
"               kv-<key>.pt with --pt), as an evictor does; absent is fine.\n"
"               With --manifest, --version is the lowest version the next\n"
"               stores of these keys will write.\n"
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
"  --size-odd BYTES   lmcache/race: odd versions are BYTES long, so that\n"
"                     a name's versions change size; reads take any size\n"
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
"  --report           vllm-store: a store that fails (mkdir, open, write,\n"
"                     close, rename; fsync with --fsync) is not a failure\n"
"                     but reported on stdout as \"<key> <step> <ERRNO>\",\n"
"                     after the client cleaned up as vLLM does; the name\n"
"                     must then not exist (after a failed fsync it must).\n"
"                     The summary line adds failed=N.  A failed O_DIRECT\n"
"                     probe is reported as \"probe <step> <ERRNO>\" and\n"
"                     means buffered I/O, as in vLLM.\n"
"                     vllm-load: a block that is absent (ENOENT) or\n"
"                     unreadable (EIO) is not a failure but reported on\n"
"                     stdout as \"<key> <step> enoent|eio\" (step: access,\n"
"                     open or read); any other outcome is still a failure\n"
"                     and is reported the same way (\"<key> read short <n>\",\n"
"                     \"<key> read wrong <offset>\", \"<key> <step> error\n"
"                     <ERRNO>\").  The summary line adds ok=N enoent=N eio=N.\n"
"                     verify: a listed name that open or read finds absent\n"
"                     or unreadable (ENOENT, EIO: a torn block the file\n"
"                     system refuses) is reported as \"<path> <step>\n"
"                     enoent|eio\" and counted, not a failure; wrong or short\n"
"                     bytes still are\n"
"  --same             vllm-load: every thread loads every key, all threads\n"
"                     the same key at once (they wait for each other before\n"
"                     each key): --threads loads per key\n"
"  --in-place         vllm-store: write each block straight to its final name\n"
"                     (open O_CREAT|O_TRUNC, one write, close; LMCache), no\n"
"                     temp file, no rename\n"
"  --fsync            vllm-store: make each block durable before counting it\n"
"                     stored: fsync(fd) before close (the temp file's, or the\n"
"                     final name's with --in-place), and after the rename\n"
"                     open(dest, O_RDONLY) + fsync + close: a file is synced\n"
"                     under its final name\n"
"  --fsync-dir        vllm-store: the POSIX idiom instead: fsync(fd) of the\n"
"                     temp file before close, rename, fsync of the directory\n"
"                     (opened O_RDONLY|O_DIRECTORY); not with --in-place\n"
"  --manifest FILE    vllm-store, lmcache, evict: append one line to\n"
"                     FILE (outside the mount) per store whose rename or\n"
"                     close returned (\"+ bin|pt KEY VERSION\") and per\n"
"                     unlink that returned (\"- bin|pt KEY VERSION\": later\n"
"                     stores write VERSION or above), fdatasync'd before\n"
"                     going on (with --fsync: once synced); verify: check\n"
"                     DIR against FILE; vllm-load: load exactly the vLLM\n"
"                     keys whose last line is \"+\" (--blocks and --key-base\n"
"                     are ignored)\n"
"  --crash-ok         the daemon may be killed during the run: a call that\n"
"                     fails with ENOTCONN or ECONNABORTED (or EIO, when a\n"
"                     statfs of --dir answers ENOTCONN then) ends the run,\n"
"                     prints \"gone <ERRNO>\" and is not a failure\n"
"  --shared           race, lmcache: another process writes the same names with\n"
"                     other versions (its own --version range): no unlink\n"
"                     before the run, its versions are checked whole only\n"
"  --pt               evict: the LMCache names instead of the vLLM layout\n"
"\n"
"Each phase prints one summary line on stdout:\n"
"  <command> <phase>: ops=N bytes=N errors=N ... secs=S MiB/s=R\n"
"Exit: 0 ok, 1 a check failed (details on stderr: path and offset), 2 usage.\n";

/* the options, their defaults where not zero */
struct options O = {
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
		"lmcache", "race", "verify", "probe", "paths", "evict",
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
		else if (FLAG("--in-place"))
			O.in_place = 1;
		else if (FLAG("--fsync"))
			O.fsync = 1;
		else if (FLAG("--fsync-dir"))
			O.fsync = O.fsync_dir = 1;
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
		} else if (ARG("--size-odd"))
			O.size_odd = parse_num(name, v, 32);
		else if (ARG("--chunk"))
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
		else if (ARG("--manifest"))
			O.manifest = v;
		else if (FLAG("--crash-ok"))
			O.crash_ok = 1;
		else if (FLAG("--shared"))
			O.shared = 1;
		else if (FLAG("--pt"))
			O.pt = 1;
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
	if (O.same && strcmp(O.cmd, "vllm-load"))
		usage_error("--same is for vllm-load");
	if (O.report && strcmp(O.cmd, "vllm-load") && strcmp(O.cmd, "vllm-store") &&
	    strcmp(O.cmd, "verify"))
		usage_error("--report is for vllm-load, vllm-store and verify");
	if ((O.in_place || O.fsync) && strcmp(O.cmd, "vllm-store"))
		usage_error("--in-place, --fsync and --fsync-dir are for vllm-store");
	if (O.in_place && O.fsync_dir)
		usage_error("--in-place and --fsync-dir exclude each other");
	if (O.in_place && O.no_rename)
		usage_error("--in-place and --no-rename exclude each other");
	if (O.manifest && strcmp(O.cmd, "vllm-store") && strcmp(O.cmd, "vllm-load") &&
	    strcmp(O.cmd, "lmcache") && strcmp(O.cmd, "evict") && strcmp(O.cmd, "verify"))
		usage_error("--manifest is for vllm-store, vllm-load, lmcache, evict and "
			    "verify");
	if (O.shared && strcmp(O.cmd, "race") && strcmp(O.cmd, "lmcache"))
		usage_error("--shared is for race and lmcache");
	if (O.size_odd && strcmp(O.cmd, "race") && strcmp(O.cmd, "lmcache"))
		usage_error("--size-odd is for race and lmcache");
	if (O.pt && strcmp(O.cmd, "evict"))
		usage_error("--pt is for evict");
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
	else if (!strcmp(O.cmd, "evict"))
		rc = cmd_evict();
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
