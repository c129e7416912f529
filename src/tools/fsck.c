/* kvtierfs-fsck: command line of the store checker (check.h).  Problems go
 * to stdout, one line each; errors to stderr, one line each; the exit
 * status is fsck(8)'s. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "store.h"

enum {
	EXIT_CLEAN = 0,
	EXIT_REPAIRED = 1,
	EXIT_LEFT = 4,
	EXIT_OPERATIONAL = 8,
	EXIT_USAGE = 16,
};

static gboolean opt_repair, opt_dry_run, opt_quiet, opt_version;

/* Paths and details are printed one per line: control bytes (a newline
 * in a file name) and the backslash are shown as \ooo. */
static void put_escaped(const char *s)
{
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			printf("\\%03o", ch);
		else
			putchar(ch);
	}
}

static void on_problem(const struct kvt_problem_report *p, void *data)
{
	if (opt_quiet)
		return;
	printf("%s ", kvt_problem_name(p->kind));
	put_escaped(p->path);
	fputs(": ", stdout);
	put_escaped(p->detail);
	if (p->repair > 0)
		fputs(" (removed)", stdout);
	else if (p->repair < 0)
		printf(" (not removed: %s)", g_strerror(-p->repair));
	else if (opt_repair && !p->repairable)
		fputs(" (left alone)", stdout);
	putchar('\n');
}

static void on_error(const char *msg, void *data)
{
	fflush(stdout);
	fprintf(stderr, "kvtierfs-fsck: %s\n", msg);
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "kvtierfs-fsck: %s (see kvtierfs-fsck --help)\n", msg);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	GOptionEntry entries[] = {
		{ "repair", 'r', 0, G_OPTION_ARG_NONE, &opt_repair,
		  "Remove what is torn or orphaned", NULL },
		{ "dry-run", 'n', 0, G_OPTION_ARG_NONE, &opt_dry_run,
		  "Change nothing (the default)", NULL },
		{ "quiet", 'q', 0, G_OPTION_ARG_NONE, &opt_quiet,
		  "Print only errors; the exit status tells the rest", NULL },
		{ "version", 'V', 0, G_OPTION_ARG_NONE, &opt_version,
		  "Print the version", NULL },
		{ NULL }
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("LOWERDIR");
	g_autoptr(GError) err = NULL;
	struct kvt_check_opts o = { .problem = on_problem, .error = on_error };
	struct kvt_check_result res;
	guint64 left;

	setlocale(LC_ALL, "");
	g_option_context_add_main_entries(ctx, entries, NULL);
	g_option_context_set_summary(ctx,
		"Checks the kvtierfs store in LOWERDIR, which no mount may be using;\n"
		"with --repair, removes what is torn or orphaned.");
	g_option_context_set_description(ctx,
		"Exit status: 0 no problem, 1 problems found and all repaired,\n"
		"4 problems left, 8 operational error, 16 usage error.  See kvtierfs-fsck(8).");
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		return usage_error(err->message);
	if (opt_version) {
		printf("kvtierfs-fsck %s (store format %d)\n", PACKAGE_VERSION,
		       KVT_FORMAT_VERSION);
		return EXIT_CLEAN;
	}
	if (opt_repair && opt_dry_run)
		return usage_error("--repair and --dry-run exclude each other");
	if (argc != 2)
		return usage_error(argc < 2 ? "expects LOWERDIR" : "expects one LOWERDIR only");

	/* A report piped into a pager or a log stays in order with stderr. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	o.repair = opt_repair;
	if (!kvt_check(argv[1], &o, &res, &err)) {
		fprintf(stderr, "kvtierfs-fsck: %s\n", err->message);
		return EXIT_OPERATIONAL;
	}
	if (!opt_quiet) {
		printf("kvtierfs-fsck: %s: %" G_GUINT64_FORMAT " names, %" G_GUINT64_FORMAT
		       " objects, %" G_GUINT64_FORMAT " problem%s", argv[1], res.names,
		       res.objects, res.problems, res.problems == 1 ? "" : "s");
		if (opt_repair)
			printf(" (%" G_GUINT64_FORMAT " repaired)", res.repaired);
		if (res.errors)
			printf(", %" G_GUINT64_FORMAT " error%s: check incomplete",
			       res.errors, res.errors == 1 ? "" : "s");
		putchar('\n');
	}
	if (res.errors)
		return EXIT_OPERATIONAL;
	left = res.problems - res.repaired;
	if (left)
		return EXIT_LEFT;
	return res.problems ? EXIT_REPAIRED : EXIT_CLEAN;
}
