/*
 * The daemon's command line, parsed by libfuse's fuse_opt: kvt_opts[] says
 * what kvtierfs matches, value_opts[] what each of its -o options accepts,
 * its default and its line in --help.  Every other -o option is left in
 * o->fuse_args for libfuse, which refuses the ones it does not know.
 */
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "log.h"
#include "options.h"

/* The -o options that take a value, in the man page's order; they index
 * value_opts[] and --help lists them so. */
enum value_key {
	KEY_READY_FD,
	KEY_TMP_SUFFIX,
	KEY_ENTRY_TIMEOUT,
	KEY_ATTR_TIMEOUT,
	KEY_NEGATIVE_TIMEOUT,
	KEY_MAX_THREADS,
	KEY_MAX_IDLE_THREADS,
	KEY_VERIFY,
	KEY_MAX_INODES,
	KEY_URING,
	KEY_VERIFY_CACHE,
	KEY_COPY_MEMORY,
	KEY_MAX_DIR_FDS,
	KEY_MAX_PENDING,
	KEY_MAX_STAGED,
	KEY_MAX_XATTR_SIZE,
	KEY_XATTR_MEMORY,
	KEY_SHARED,
	KEY_SYNC,
	KEY_RECLAIM,
	KEY_RECLAIM_INTERVAL,
	KEY_SCRUB,
	KEY_SCRUB_INTERVAL,
	KEY_MAX_SIZE,
	KEY_MIN_FREE,
	KEY_EVICT,
	KEY_EVICT_HIGH,
	KEY_EVICT_LOW,
	KEY_LOG_LEVEL,
	KEY_LOG_FILE,
	N_VALUE_KEYS
};

enum value_kind {
	COUNT,		/* a whole number in [min, max], into an int */
	SECONDS,	/* a decimal number in [min, max], into a double */
	SIZE,		/* bytes, K, M, G or T (powers of 1024) after, into a double */
	WORD,		/* words[0] or words[1], into a bool: true for words[1] */
	FLAG,		/* the bare name, into a bool: true */
	TEXT,		/* text without '/', into a malloc'd char * */
	CHOICE,		/* one of choices[], into an int: its index */
	PATH,		/* a file's path, into a malloc'd char * */
};

struct value_opt {
	const char *name;
	enum value_kind kind;
	size_t offset;		/* of the field in struct kvt_options */
	double min, max;	/* COUNT, SECONDS */
	double dflt;		/* COUNT, SECONDS; WORD: index into words */
	const char *dflt_text;	/* TEXT's default; else --help's word for a
				 * dflt outside [min, max] */
	const char *words[2];	/* WORD */
	const char *const *choices; /* CHOICE: NULL-terminated */
	const char *what;	/* what the error says it expects, if not the
				 * range */
	const char *metavar;	/* --help: "-o name=metavar" */
	const char *help;	/* --help: one line, without the default */
};

#define FIELD(f) offsetof(struct kvt_options, f)

/* In the order of enum kvt_verify_mode. */
static const char *const verify_modes[] = { "once", "always", "auto", NULL };

/* In the order of enum kvt_evict_choice. */
static const char *const evict_policies[] = { "adaptive", "s3fifo", "slru", "lru", "off", NULL };

/* In the order of enum kvt_log_level. */
static const char *const log_levels[] = {
	"error", "warning", "notice", "info", "debug", NULL
};

static const struct value_opt value_opts[N_VALUE_KEYS] = {
	[KEY_READY_FD] = {
		"ready_fd", COUNT, FIELD(ready_fd), 0, INT_MAX, -1, "none",
		.what = "a file descriptor number", .metavar = "N",
		.help = "say \"ready PID\" on fd N once mounted",
	},
	[KEY_TMP_SUFFIX] = {
		"tmp_suffix", TEXT, FIELD(tmp_suffix), .dflt_text = ".tmp",
		.what = "a name suffix without '/'", .metavar = "S",
		.help = "names ending in S are temp files",
	},
	[KEY_ENTRY_TIMEOUT] = {
		"entry_timeout", SECONDS, FIELD(entry_timeout), 0, 86400, -1, "86400 alone, 1 shared",
		.metavar = "SEC", .help = "seconds the kernel caches a name",
	},
	[KEY_ATTR_TIMEOUT] = {
		"attr_timeout", SECONDS, FIELD(attr_timeout), 0, 86400, -1, "86400 alone, 1 shared",
		.metavar = "SEC", .help = "seconds it caches attributes",
	},
	[KEY_NEGATIVE_TIMEOUT] = {
		"negative_timeout", SECONDS, FIELD(negative_timeout), 0, 86400, 1,
		.metavar = "SEC", .help = "seconds it caches a missing name",
	},
	[KEY_MAX_THREADS] = {
		"max_threads", COUNT, FIELD(max_threads), 1, 1024, 64,
		.metavar = "N", .help = "threads serving FUSE requests",
	},
	[KEY_MAX_IDLE_THREADS] = {
		"max_idle_threads", COUNT, FIELD(max_idle_threads), 0, 1024, -1, "all",
		.metavar = "N", .help = "idle threads kept",
	},
	[KEY_VERIFY] = {
		"verify", CHOICE, FIELD(verify), .dflt = KVT_VERIFY_AUTO,
		.choices = verify_modes,
		.help = "hash once a mount, at every open, or by the store's disk",
	},
	[KEY_MAX_INODES] = {
		"max_inodes", COUNT, FIELD(max_inodes), 64, 1e9, -1,
		"auto: 1 KiB each in 1/64 of memory, 65536 to 4194304",
		.metavar = "N", .help = "files and directories the kernel knows",
	},
	[KEY_URING] = {
		"uring", WORD, FIELD(no_uring), .dflt = 0,
		.words = { "1", "0" },
		.help = "hash through io_uring, or plain reads",
	},
	[KEY_VERIFY_CACHE] = {
		"verify_cache", COUNT, FIELD(verify_cache), 16, 1e9, 100000,
		.metavar = "N", .help = "objects known intact",
	},
	[KEY_COPY_MEMORY] = {
		"copy_memory", COUNT, FIELD(copy_memory), 0, 1048576, -1, "auto",
		.metavar = "MIB",
		.help = "MiB of verified copies, 0 none (auto: 1/16 of memory, 4096 at most)",
	},
	[KEY_MAX_DIR_FDS] = {
		"max_dir_fds", COUNT, FIELD(max_dir_fds), 16, 1048576, -1,
		"auto: a quarter of the descriptors, 1024 at least",
		.metavar = "N", .help = "open lower directories",
	},
	[KEY_MAX_PENDING] = {
		"max_pending", COUNT, FIELD(max_pending), 1, 1e9, -1,
		"auto: a quarter of the descriptors, 64 at least",
		.metavar = "N", .help = "files being written per user, EDQUOT past it",
	},
	[KEY_MAX_STAGED] = {
		"max_staged", COUNT, FIELD(max_staged), 1, 1e9, -1,
		"auto: a quarter of the lower file system",
		.metavar = "MIB", .help = "MiB of files being written per user, EDQUOT past it",
	},
	/* Every file's xattrs must fit its record (KVT_RECORD_MAX, where they
	 * are hex): 1 MiB of names and values does, whatever their number. */
	[KEY_MAX_XATTR_SIZE] = {
		"max_xattr_size", COUNT, FIELD(max_xattr_size), 0, 1048576, 65536,
		.metavar = "BYTES", .help = "xattr names and values per file, E2BIG past it",
	},
	[KEY_XATTR_MEMORY] = {
		"xattr_memory", COUNT, FIELD(xattr_memory), 1, 1048576, 64,
		.metavar = "MIB",
		.help = "MiB of xattrs of files not yet published (a quarter per user)",
	},
	/* kvtierfs's: the kernel's MS_SYNCHRONOUS would send an fsync after
	 * every write, and an fsync publishes a file written in place. */
	[KEY_SHARED] = {
		"shared", FLAG, FIELD(shared), .dflt_text = "when another mount is live",
		.help = "other mounts (other hosts) may use the store",
	},
	[KEY_SYNC] = {
		"sync", FLAG, FIELD(sync), .dflt_text = "off",
		.help = "every publication durable before it returns",
	},
	[KEY_RECLAIM] = {
		"reclaim", COUNT, FIELD(reclaim), 0, 1e9, 2000,
		.metavar = "N", .help = "orphan reclamation: lower entries/s, 0 off",
	},
	[KEY_RECLAIM_INTERVAL] = {
		"reclaim_interval", SECONDS, FIELD(reclaim_interval), 0, 86400, 60,
		.metavar = "SEC", .help = "seconds between reclamation passes",
	},
	[KEY_MAX_SIZE] = {
		"max_size", SIZE, FIELD(max_size), 0, 1125899906842624.0 * 1024, 0, "none",
		.what = "a size: bytes, or a number with K, M, G or T after it",
		.metavar = "SIZE", .help = "the tier's budget: bytes of objects, ENOSPC past it",
	},
	[KEY_MIN_FREE] = {
		"min_free", COUNT, FIELD(min_free), 0, 99, 0,
		.metavar = "PERCENT", .help = "of the lower file system kept free, ENOSPC past it",
	},
	[KEY_EVICT] = {
		"evict", CHOICE, FIELD(evict), .dflt = KVT_EVICT_CHOICE_ADAPTIVE,
		.choices = evict_policies,
		.help = "with a budget, what goes first (off: ENOSPC at the budget)",
	},
	[KEY_EVICT_HIGH] = {
		"evict_high", COUNT, FIELD(evict_high), 1, 100, 99,
		.metavar = "PERCENT", .help = "of the budget: an eviction pass starts past it",
	},
	[KEY_EVICT_LOW] = {
		"evict_low", COUNT, FIELD(evict_low), 0, 99, 97,
		.metavar = "PERCENT",
		.help = "of the budget: ... and evicts down to it (evict_high alone: "
			"at most evict_high less 2)",
	},
	[KEY_SCRUB] = {
		"scrub", COUNT, FIELD(scrub), 0, 1048576, 0,
		.metavar = "MIB", .help = "scrub: MiB of objects hashed a second, 0 off",
	},
	[KEY_SCRUB_INTERVAL] = {
		"scrub_interval", SECONDS, FIELD(scrub_interval), 0, 2592000, 86400,
		.metavar = "SEC", .help = "seconds between scrub passes",
	},
	[KEY_LOG_LEVEL] = {
		"log_level", CHOICE, FIELD(log_level), .dflt = KVT_LOG_INFO,
		.choices = log_levels,
		.help = "the least severe messages logged",
	},
	[KEY_LOG_FILE] = {
		"log_file", PATH, FIELD(log_file), .dflt_text = "stderr, or the system log once daemonized",
		.what = "a file's path", .metavar = "FILE",
		.help = "append log lines to FILE (SIGHUP reopens it)",
	},
};

/* Both "name=value" and a bare "name" reach the processing function, so
 * that a missing value is kvtierfs's error, not an unknown libfuse option. */
#define SWITCH(templ, f)	{ templ, FIELD(f), 1 }
#define VALUE(name, key)	FUSE_OPT_KEY(name, key), FUSE_OPT_KEY(name "=", key)

static const struct fuse_opt kvt_opts[] = {
	SWITCH("-f", foreground),
	SWITCH("--foreground", foreground),
	SWITCH("-d", debug),
	SWITCH("--debug", debug),
	SWITCH("-V", version),
	SWITCH("--version", version),
	SWITCH("-h", help),
	SWITCH("--help", help),
	VALUE("ready_fd", KEY_READY_FD),
	VALUE("tmp_suffix", KEY_TMP_SUFFIX),
	VALUE("entry_timeout", KEY_ENTRY_TIMEOUT),
	VALUE("attr_timeout", KEY_ATTR_TIMEOUT),
	VALUE("negative_timeout", KEY_NEGATIVE_TIMEOUT),
	VALUE("max_threads", KEY_MAX_THREADS),
	VALUE("max_idle_threads", KEY_MAX_IDLE_THREADS),
	VALUE("verify", KEY_VERIFY),
	VALUE("max_inodes", KEY_MAX_INODES),
	VALUE("uring", KEY_URING),
	VALUE("verify_cache", KEY_VERIFY_CACHE),
	VALUE("copy_memory", KEY_COPY_MEMORY),
	VALUE("max_dir_fds", KEY_MAX_DIR_FDS),
	VALUE("max_pending", KEY_MAX_PENDING),
	VALUE("max_staged", KEY_MAX_STAGED),
	VALUE("max_xattr_size", KEY_MAX_XATTR_SIZE),
	VALUE("xattr_memory", KEY_XATTR_MEMORY),
	VALUE("shared", KEY_SHARED),
	VALUE("sync", KEY_SYNC),
	VALUE("reclaim", KEY_RECLAIM),
	VALUE("reclaim_interval", KEY_RECLAIM_INTERVAL),
	VALUE("max_size", KEY_MAX_SIZE),
	VALUE("min_free", KEY_MIN_FREE),
	VALUE("evict", KEY_EVICT),
	VALUE("evict_high", KEY_EVICT_HIGH),
	VALUE("evict_low", KEY_EVICT_LOW),
	VALUE("scrub", KEY_SCRUB),
	VALUE("scrub_interval", KEY_SCRUB_INTERVAL),
	VALUE("log_level", KEY_LOG_LEVEL),
	VALUE("log_file", KEY_LOG_FILE),
	/* libfuse's: noted, and kept for it */
	SWITCH("allow_other", allow_other),
	FUSE_OPT_KEY("allow_other", FUSE_OPT_KEY_KEEP),
	FUSE_OPT_END
};

/* fuse_opt_parse()'s data: the options first, so that the offsets of
 * kvt_opts[] apply to it, then the first error, which waits until --help
 * and --version have had their say. */
struct parse {
	struct kvt_options o;
	char *error;
	bool evict_low_given;
};
G_STATIC_ASSERT(offsetof(struct parse, o) == 0);

static void fail(struct parse *p, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void fail(struct parse *p, const char *fmt, ...)
{
	va_list ap;

	if (p->error)
		return;
	va_start(ap, fmt);
	p->error = g_strdup_vprintf(fmt, ap);
	va_end(ap);
}

/* Digits only: no sign, no space, no fraction, no exponent. */
static bool parse_count(const char *s, double min, double max, int *out)
{
	unsigned long long n = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		n = n * 10 + (unsigned)(*s - '0');
		if (n > (unsigned long long)max)
			return false;
	}
	if (n < (unsigned long long)min)
		return false;
	*out = (int)n;
	return true;
}

/* Digits with at most one '.': "2", "0.25", ".5"; no sign, no exponent,
 * no "inf", whatever the locale. */
static bool parse_seconds(const char *s, double min, double max, double *out)
{
	size_t digits = strspn(s, "0123456789");
	const char *p = s + digits;
	double v;

	if (*p == '.') {
		size_t frac = strspn(p + 1, "0123456789");

		digits += frac;
		p += 1 + frac;
	}
	if (*p || !digits)
		return false;
	v = g_ascii_strtod(s, NULL);
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* Digits, then at most one of K, M, G, T (powers of 1024). */
static bool parse_size(const char *s, double min, double max, double *out)
{
	static const char units[] = "KMGT";
	size_t digits = strspn(s, "0123456789");
	const char *u = s[digits] ? strchr(units, g_ascii_toupper(s[digits])) : NULL;
	double v;

	if (!digits || digits > 15 || (s[digits] && (!u || !*u || s[digits + 1])))
		return false;
	v = g_ascii_strtod(s, NULL);
	for (const char *p = units; u && p <= u; p++)
		v *= 1024;
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

static char *expects(const struct value_opt *v)
{
	if (v->what)
		return g_strdup(v->what);
	switch (v->kind) {
	case COUNT:
		return g_strdup_printf("a whole number from %.0f to %.0f",
				       v->min, v->max);
	case SECONDS:
		return g_strdup_printf("seconds from %g to %g", v->min, v->max);
	case WORD:
		return g_strdup_printf("'%s' or '%s'", v->words[0], v->words[1]);
	case CHOICE: {
		g_autofree char *list = g_strjoinv("|", (char **)v->choices);

		return g_strdup_printf("one of %s", list);
	}
	case SIZE:
	case FLAG:
	case TEXT:
	case PATH:
		break;
	}
	return g_strdup("a value");
}

static void set_value(struct parse *p, const struct value_opt *v, const char *arg)
{
	const char *eq = strchr(arg, '=');
	const char *val = eq ? eq + 1 : NULL;
	void *field = (char *)&p->o + v->offset;
	g_autofree char *what = NULL;
	g_autofree char *got = NULL;

	switch (v->kind) {
	case COUNT:
		if (val && parse_count(val, v->min, v->max, field))
			return;
		break;
	case SECONDS:
		if (val && parse_seconds(val, v->min, v->max, field))
			return;
		break;
	case SIZE:
		if (val && parse_size(val, v->min, v->max, field))
			return;
		break;
	case WORD:
		for (int i = 0; val && i < 2; i++) {
			if (!strcmp(val, v->words[i])) {
				*(bool *)field = i;
				return;
			}
		}
		break;
	case CHOICE:
		for (int i = 0; val && v->choices[i]; i++) {
			if (!strcmp(val, v->choices[i])) {
				*(int *)field = i;
				return;
			}
		}
		break;
	case PATH:
		/* a name ending in '/' is a directory's */
		if (val && *val && !g_str_has_suffix(val, "/")) {
			free(*(char **)field);
			*(char **)field = strdup(val);
			return;
		}
		break;
	case FLAG:
		if (!eq) {
			*(bool *)field = true;
			return;
		}
		got = g_strescape(val, NULL);
		fail(p, "-o %s: expects no value, got '%s'", v->name, got);
		return;
	case TEXT:
		/* a bare "tmp_suffix" is the empty one, as "tmp_suffix=" */
		if (!val || !strchr(val, '/')) {
			free(*(char **)field);
			*(char **)field = strdup(val ? val : "");
			return;
		}
		break;
	}
	what = expects(v);
	if (!val) {
		fail(p, "-o %s: expects %s", v->name, what);
		return;
	}
	got = g_strescape(val, NULL); /* one line, whatever was given */
	fail(p, "-o %s: expects %s, got '%s'", v->name, what, got);
}

static int process(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct parse *p = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (!p->o.lowerdir)
			p->o.lowerdir = strdup(arg);
		else if (!p->o.mountpoint)
			p->o.mountpoint = strdup(arg);
		else
			fail(p, "expects LOWERDIR and MOUNTPOINT only, got '%s' too "
			     "(see kvtierfs --help)", arg);
		return 0;
	case FUSE_OPT_KEY_OPT:
		/* A command-line switch kvtierfs does not know; inside -o a
		 * name never starts with '-'. */
		if (arg[0] == '-') {
			fail(p, "unknown option %s (see kvtierfs --help)", arg);
			return 0;
		}
		return arg[0] != '\0'; /* the rest is libfuse's */
	default:
		if (key == KEY_EVICT_LOW)
			p->evict_low_given = true;
		set_value(p, &value_opts[key], arg);
		return 0;
	}
}

static void help_line(const char *opt, const char *text)
{
	printf("  %-23s %s\n", opt, text);
}

/* 1000000000 rather than %g's 1e+09 */
static char *number(const struct value_opt *v, double x)
{
	return v->kind == COUNT ? g_strdup_printf("%.0f", x) : g_strdup_printf("%g", x);
}

static void help_value(const struct value_opt *v)
{
	g_autofree char *opt = NULL;
	g_autofree char *text = NULL;
	g_autofree char *range = NULL;
	g_autofree char *dflt = NULL;

	if (v->kind == WORD) {
		opt = g_strdup_printf("-o %s=%s|%s", v->name, v->words[0], v->words[1]);
	} else if (v->kind == CHOICE) {
		g_autofree char *list = g_strjoinv("|", (char **)v->choices);

		opt = g_strdup_printf("-o %s=%s", v->name, list);
	} else if (v->kind == FLAG) {
		opt = g_strdup_printf("-o %s", v->name);
	} else {
		opt = g_strdup_printf("-o %s=%s", v->name, v->metavar);
	}
	switch (v->kind) {
	case COUNT:
	case SECONDS:
	case SIZE:
		if (!v->what) {
			g_autofree char *min = number(v, v->min);
			g_autofree char *max = number(v, v->max);

			range = g_strdup_printf("%s-%s, ", min, max);
		}
		if (v->dflt < v->min || v->dflt > v->max || (v->kind == SIZE && !v->dflt))
			dflt = g_strdup(v->dflt_text);
		else
			dflt = number(v, v->dflt);
		break;
	case WORD:
		dflt = g_strdup(v->words[(int)v->dflt]);
		break;
	case CHOICE:
		dflt = g_strdup(v->choices[(int)v->dflt]);
		break;
	case FLAG:
	case TEXT:
	case PATH:
		dflt = g_strdup(v->dflt_text);
		break;
	}
	text = g_strdup_printf("%s (%sdefault %s)", v->help, range ? range : "", dflt);
	help_line(opt, text);
}

static void print_help(void)
{
	printf("usage: kvtierfs [options] LOWERDIR MOUNTPOINT\n"
	       "\n"
	       "Mounts a verified, content-addressed KV-cache tier at MOUNTPOINT,\n"
	       "backed by the store in LOWERDIR.  kvtierfs(8) says more.\n"
	       "\n"
	       "Options:\n");
	help_line("-f, --foreground", "stay in the foreground");
	help_line("-d, --debug", "foreground, with FUSE request tracing");
	help_line("-V, --version", "print the version and exit");
	help_line("-h, --help", "print this help and exit");
	help_line("-o OPT[,OPT...]", "mount options, below; may be repeated");
	printf("\nkvtierfs mount options:\n");
	for (int k = 0; k < N_VALUE_KEYS; k++)
		help_value(&value_opts[k]);
	printf("\nOther mount options go to libfuse, which refuses the ones it does not\n"
	       "know; among them:\n");
	help_line("-o allow_other", "let other users in, with kernel permission checks");
	help_line("-o allow_root", "let root in too");
	help_line("-o auto_unmount", "unmount when the daemon dies");
	help_line("-o fsname=NAME", "source in the mount table (default LOWERDIR's path)");
	help_line("-o ro", "read-only mount");
}

static void set_defaults(struct kvt_options *o)
{
	for (int k = 0; k < N_VALUE_KEYS; k++) {
		const struct value_opt *v = &value_opts[k];
		void *field = (char *)o + v->offset;

		switch (v->kind) {
		case COUNT:
			*(int *)field = (int)v->dflt;
			break;
		case SECONDS:
		case SIZE:
			*(double *)field = v->dflt;
			break;
		case WORD:
		case FLAG:
			*(bool *)field = v->dflt != 0;
			break;
		case CHOICE:
			*(int *)field = (int)v->dflt;
			break;
		case TEXT:
			*(char **)field = strdup(v->dflt_text);
			break;
		case PATH:
			*(char **)field = NULL;
			break;
		}
	}
}

int kvt_options_parse(int argc, char **argv, struct kvt_options *o)
{
	struct parse p = { .o.fuse_args = FUSE_ARGS_INIT(argc, argv) };
	int ret = -1;

	set_defaults(&p.o);
	/* A last "-o" would make libfuse say "missing argument" itself. */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (strcmp(argv[i], "-o"))
			continue;
		if (i == argc - 1) {
			fail(&p, "-o: expects a list of mount options");
			p.o.fuse_args.argc--;
		}
		i++; /* its list, whatever it looks like */
	}
	if (fuse_opt_parse(&p.o.fuse_args, &p, kvt_opts, process))
		goto out; /* out of memory, libfuse said so */
	if (p.o.help) { /* wins over anything else, as --help does */
		print_help();
		p.o.version = 0;
		ret = 0;
		goto out;
	}
	if (p.o.version) {
		ret = 0;
		goto out;
	}
	if (!p.error && !p.o.mountpoint)
		fail(&p, "expects LOWERDIR and MOUNTPOINT (see kvtierfs --help)");
	/* evict_high alone: the pass's span stays what the defaults make
	 * it. */
	if (!p.evict_low_given && p.o.evict_low >= p.o.evict_high)
		p.o.evict_low = p.o.evict_high > 2 ? p.o.evict_high - 2 : 0;
	if (!p.error && p.o.evict_low >= p.o.evict_high)
		fail(&p, "-o evict_low=%d: must be less than evict_high (%d)", p.o.evict_low,
		     p.o.evict_high);
	if (p.error) {
		fprintf(stderr, "kvtierfs: %s\n", p.error);
		goto out;
	}

	/* -d: the foreground, and libfuse's request trace (below) */
	if (p.o.debug) {
		p.o.foreground = 1;
		p.o.log_level = KVT_LOG_DEBUG;
	}
	/* First, so that the user's subtype= wins (fsname: main.c). */
	if (fuse_opt_insert_arg(&p.o.fuse_args, 1, "-osubtype=kvtierfs"))
		goto out;
	/* Without allow_other only the mounting user reaches the files, and
	 * the kernel's own permission checks would cost a round trip to the
	 * daemon on every access() after a directory changed.  With it, the
	 * kernel checks every access. */
	if (p.o.allow_other && fuse_opt_add_arg(&p.o.fuse_args, "-odefault_permissions"))
		goto out;
	if (p.o.debug && fuse_opt_add_arg(&p.o.fuse_args, "-d"))
		goto out;
	ret = 0;
out:
	g_free(p.error);
	*o = p.o;
	return ret;
}

char *kvt_options_describe(const struct kvt_options *o)
{
	GString *out = g_string_new(NULL);

	for (int k = 0; k < N_VALUE_KEYS; k++) {
		const struct value_opt *v = &value_opts[k];
		const void *field = (const char *)o + v->offset;
		double x;

		switch (v->kind) {
		case COUNT:
			if (*(const int *)field < v->min) /* "none", "all" */
				g_string_append_printf(out, ",%s=%s", v->name, v->dflt_text);
			else
				g_string_append_printf(out, ",%s=%d", v->name,
						       *(const int *)field);
			break;
		case SIZE:
			x = *(const double *)field;
			if (x <= 0)
				g_string_append_printf(out, ",%s=%s", v->name, v->dflt_text);
			else
				g_string_append_printf(out, ",%s=%.0f", v->name, x);
			break;
		case SECONDS:
			x = *(const double *)field;
			if (x < 0) /* by sharing: share.h */
				g_string_append_printf(out, ",%s=auto", v->name);
			else
				g_string_append_printf(out, ",%s=%g", v->name, x);
			break;
		case WORD:
			g_string_append_printf(out, ",%s=%s", v->name,
					       v->words[*(const bool *)field]);
			break;
		case FLAG:
			if (*(const bool *)field)
				g_string_append_printf(out, ",%s", v->name);
			break;
		case CHOICE:
			g_string_append_printf(out, ",%s=%s", v->name,
					       v->choices[*(const int *)field]);
			break;
		case TEXT:
		case PATH:
			if (*(char *const *)field)
				g_string_append_printf(out, ",%s=%s", v->name,
						       *(char *const *)field);
			break;
		}
	}
	if (o->allow_other)
		g_string_append(out, ",allow_other");
	if (out->len) /* the first one's comma */
		g_string_erase(out, 0, 1);
	return g_string_free(out, FALSE);
}

void kvt_options_free(struct kvt_options *o)
{
	free(o->tmp_suffix);
	free(o->log_file);
	free(o->lowerdir);
	free(o->mountpoint);
	fuse_opt_free_args(&o->fuse_args);
	memset(o, 0, sizeof(*o));
}
