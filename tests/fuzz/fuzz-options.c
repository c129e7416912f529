/* libFuzzer target: the daemon's command line (src/daemon/options.c, through
 * libfuse's fuse_opt).  The input is split at newlines into argv[1..]:
 *
 *   -o
 *   allow_other,max_threads=4
 *   /lower
 *   /mnt
 *
 * Any argv must parse to 0 with every value in its range, or to -1 (with
 * one line on stderr, which goes to /dev/null here unless
 * KVT_FUZZ_VERBOSE is set); never a crash, and nothing left allocated
 * after kvt_options_free() (run with leak detection). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define MAX_ARGS 256

#define expect(cond)                                                         \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(real_stderr, "fuzz-options: %s:%d: expected %s\n", \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

static FILE *real_stderr;
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	real_stderr = stderr;
	/* The parser and libfuse print through the stdio streams, sanitizer
	 * and libFuzzer reports go to fd 2 itself: swapping the streams
	 * silences the one and keeps the other. */
	if (!getenv("KVT_FUZZ_VERBOSE"))
		devnull = fopen("/dev/null", "w");
	return 0;
}

static void check_parsed(const struct kvt_options *o)
{
	expect(o->lowerdir && o->mountpoint);
	expect(o->ready_fd >= -1);
	expect(o->tmp_suffix && !strchr(o->tmp_suffix, '/'));
	/* -1: not given, by sharing (share.h) */
	expect(o->entry_timeout == -1 || (o->entry_timeout >= 0 && o->entry_timeout <= 86400));
	expect(o->attr_timeout == -1 || (o->attr_timeout >= 0 && o->attr_timeout <= 86400));
	expect(o->negative_timeout >= 0 && o->negative_timeout <= 86400);
	expect(o->max_threads >= 1 && o->max_threads <= 1024);
	expect(o->max_idle_threads >= -1 && o->max_idle_threads <= 1024);
	expect(o->max_inodes == -1 || (o->max_inodes >= 64 && o->max_inodes <= 1000000000)); /* -1: auto */
	expect(o->verify_cache >= 16 && o->verify_cache <= 1000000000);
	expect(o->max_dir_fds == -1 || (o->max_dir_fds >= 16 && o->max_dir_fds <= 1048576)); /* -1: auto */
	expect(!o->debug || o->foreground);
	/* what goes to fuse_session_new(): argv[0] and a NULL end */
	expect(o->fuse_args.argc >= 1 && o->fuse_args.argv);
	expect(o->fuse_args.argv[o->fuse_args.argc] == NULL);
	for (int i = 0; i < o->fuse_args.argc; i++)
		expect(o->fuse_args.argv[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);
	char *argv[MAX_ARGS + 2];
	int argc = 0, ret;
	struct kvt_options o;
	FILE *out = stdout, *err = stderr;

	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[argc++] = "kvtierfs";
	for (char *p = copy, *nl; p && argc <= MAX_ARGS; p = nl) {
		nl = memchr(p, '\n', copy + size - p);
		if (nl)
			*nl++ = '\0';
		else if (!*p && p == copy + size)
			break; /* no empty last argument after a final newline */
		argv[argc++] = p;
	}
	argv[argc] = NULL;

	if (devnull) {
		stdout = devnull;
		stderr = devnull;
	}
	ret = kvt_options_parse(argc, argv, &o);
	stdout = out;
	stderr = err;

	expect(ret == 0 || ret == -1);
	if (ret == 0 && !o.help && !o.version)
		check_parsed(&o);
	kvt_options_free(&o);
	free(copy);
	return 0;
}
