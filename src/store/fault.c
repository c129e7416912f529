/* The door's fault layer (fault.h): the spec parser and the rules. */
#include "fault.h"
#include "lowerr.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <string.h>

bool kvt_faults_on;

static const char *const op_names[KVT_FAULT_NOPS] = {
	[KVT_FAULT_OPEN] = "open",       [KVT_FAULT_CREATE] = "create",
	[KVT_FAULT_OPENDIR] = "opendir", [KVT_FAULT_STAT] = "stat",
	[KVT_FAULT_MKDIR] = "mkdir",     [KVT_FAULT_RMDIR] = "rmdir",
	[KVT_FAULT_UNLINK] = "unlink",   [KVT_FAULT_LINK] = "link",
	[KVT_FAULT_RENAME] = "rename",   [KVT_FAULT_SETATTR] = "setattr",
	[KVT_FAULT_SYNC] = "sync",       [KVT_FAULT_LIST] = "list",
	[KVT_FAULT_READ] = "read",       [KVT_FAULT_SERVE] = "serve",
	[KVT_FAULT_WRITE] = "write",     [KVT_FAULT_LOCK] = "lock",
};
#define OP_ANY KVT_FAULT_NOPS

#define E(x) { #x, x }
static const struct {
	const char *name;
	int num;
} errnos[] = {
	E(EIO), E(ENOSPC), E(EDQUOT), E(EROFS), E(EACCES), E(EPERM), E(ENOENT),
	E(EEXIST), E(EMLINK), E(ENOMEM), E(EAGAIN), E(EBUSY), E(EINTR), E(ESTALE),
	E(ENAMETOOLONG), E(ETIMEDOUT), E(EFBIG), E(ENOTEMPTY), E(EINVAL),
	E(EOVERFLOW), E(ENODATA), E(EXDEV), E(ENOTDIR), E(EISDIR),
};
#undef E

struct rule {
	char *text;          /* as written */
	int op;              /* enum kvt_fault_op, or OP_ANY */
	int err;             /* positive errno; 0 for a delay */
	gulong delay_us;     /* the call waits, then goes on */
	guint64 every, after, max; /* 0: no such condition */
	bool has_p;
	guint64 p_below;     /* a call's draw fires below this */
	char *glob;          /* NULL: any name, none */
	bool negate;
	guint64 calls;       /* atomic: calls counted */
	guint64 faults;      /* atomic: faults injected */
};

static struct rule *rules;
static guint n_rules;
static guint64 seed;

static guint64 mix64(guint64 z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static bool parse_u64(const char *s, guint64 min, guint64 *out)
{
	return g_ascii_string_to_unsigned(s, 10, min, G_MAXUINT64, out, NULL);
}

static int parse_errno(const char *s)
{
	guint64 n;

	for (size_t i = 0; i < G_N_ELEMENTS(errnos); i++)
		if (!strcmp(s, errnos[i].name))
			return errnos[i].num;
	if (parse_u64(s, 1, &n) && n < 4096)
		return (int)n;
	return 0;
}

/* "0.02", "1/50": a probability in (0, 1]. */
static bool parse_p(const char *s, double *p)
{
	const char *slash = strchr(s, '/');
	char *end;

	if (slash) {
		g_autofree char *num = g_strndup(s, slash - s);
		guint64 a, b;

		if (!parse_u64(num, 0, &a) || !parse_u64(slash + 1, 1, &b))
			return false;
		*p = (double)a / (double)b;
	} else {
		*p = g_ascii_strtod(s, &end);
		if (end == s || *end)
			return false;
	}
	return *p > 0 && *p <= 1;
}

static bool parse_cond(struct rule *r, const char *c, GError **err)
{
	const char *eq = strchr(c, '=');
	g_autofree char *key = eq ? g_strndup(c, eq - c) : NULL;
	const char *val = eq ? eq + 1 : c;
	double p = 0;
	bool good;

	if (!eq && strchr(c, '/')) {
		key = g_strdup("p");
	} else if (!eq) {
		key = g_strdup("every");
	}
	if (!strcmp(key, "every")) {
		good = parse_u64(val, 1, &r->every);
	} else if (!strcmp(key, "after")) {
		good = parse_u64(val, 0, &r->after);
	} else if (!strcmp(key, "max")) {
		good = parse_u64(val, 1, &r->max);
	} else if (!strcmp(key, "p")) {
		good = parse_p(val, &p);
		r->has_p = good && p < 1;
		/* p * 2^64, short of overflow */
		r->p_below = p < 1 ? (guint64)(p * 18446744073709551616.0) : G_MAXUINT64;
	} else if (!strcmp(key, "name")) {
		r->negate = val[0] == '!';
		g_free(r->glob);
		r->glob = g_strdup(val + r->negate);
		good = r->glob[0] != '\0';
	} else {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "'%s': unknown condition '%s' (every=, p=, after=, max=, name=)",
			    r->text, key);
		return false;
	}
	if (!good)
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "'%s': bad value in '%s'", r->text, c);
	return good;
}

static bool parse_rule(struct rule *r, const char *text, GError **err)
{
	g_auto(GStrv) f = g_strsplit(text, ":", -1);
	guint n = g_strv_length(f);

	memset(r, 0, sizeof(*r));
	r->text = g_strdup(text);
	r->op = -1;
	if (n < 2) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "'%s': a rule is OP:ERRNO[:COND]...", text);
		return false;
	}
	if (!strcmp(f[0], "any"))
		r->op = OP_ANY;
	for (int i = 0; i < KVT_FAULT_NOPS; i++)
		if (!strcmp(f[0], op_names[i]))
			r->op = i;
	if (r->op < 0) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "'%s': unknown operation '%s'", text, f[0]);
		return false;
	}
	r->err = parse_errno(f[1]);
	if (!r->err && g_str_has_suffix(f[1], "ms")) {
		g_autofree char *ms = g_strndup(f[1], strlen(f[1]) - 2);
		guint64 v;

		if (parse_u64(ms, 1, &v) && v <= 60000)
			r->delay_us = v * 1000;
	}
	if (!r->err && !r->delay_us) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "'%s': unknown errno '%s'", text, f[1]);
		return false;
	}
	for (guint i = 2; i < n; i++)
		if (!parse_cond(r, f[i], err))
			return false;
	return true;
}

static void free_rules(struct rule *rs, guint n)
{
	for (guint i = 0; i < n; i++) {
		g_free(rs[i].text);
		g_free(rs[i].glob);
	}
	g_free(rs);
}

bool kvt_faults_init(const char *spec, GError **err)
{
	g_auto(GStrv) items = NULL;
	struct rule *rs;
	guint n = 0;
	guint64 sd = 0;

	kvt_faults_fini();
	if (!spec || !spec[0])
		return true;
	items = g_strsplit(spec, ",", -1);
	rs = g_new0(struct rule, g_strv_length(items) + 1);
	for (char **it = items; *it; it++) {
		if (g_str_has_prefix(*it, "seed=")) {
			if (!parse_u64(*it + 5, 0, &sd)) {
				g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
					    "'%s': bad seed", *it);
				goto fail;
			}
			continue;
		}
		if (!parse_rule(&rs[n++], *it, err))
			goto fail;
	}
	if (!n) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "'%s': no rule", spec);
		goto fail;
	}
	rules = rs;
	n_rules = n;
	seed = sd;
	kvt_faults_on = true;
	return true;
fail:
	free_rules(rs, n);
	return false;
}

void kvt_faults_fini(void)
{
	kvt_faults_on = false;
	free_rules(rules, n_rules);
	rules = NULL;
	n_rules = 0;
	seed = 0;
}

char *kvt_faults_summary(void)
{
	GString *s;

	if (!n_rules)
		return NULL;
	s = g_string_new(NULL);
	for (guint i = 0; i < n_rules; i++)
		g_string_append_printf(s, "%s%s: %" G_GUINT64_FORMAT " faults in %"
				       G_GUINT64_FORMAT " calls", i ? "\n" : "",
				       rules[i].text,
				       __atomic_load_n(&rules[i].faults, __ATOMIC_RELAXED),
				       __atomic_load_n(&rules[i].calls, __ATOMIC_RELAXED));
	return g_string_free(s, FALSE);
}

static bool name_matches(const struct rule *r, const char *const *names, guint n)
{
	bool any = false, matched = false;

	if (!r->glob)
		return true;
	for (guint i = 0; i < n; i++) {
		if (!names[i])
			continue;
		any = true;
		if (fnmatch(r->glob, names[i], 0) == 0) {
			matched = true;
			break;
		}
	}
	return any && matched != r->negate;
}

/* Counts the call; true when @r makes it fail. */
static bool fires(struct rule *r, guint idx)
{
	guint64 n = __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED), f;

	if (n <= r->after)
		return false;
	if (r->every && (n - r->after) % r->every)
		return false;
	if (r->has_p && mix64(seed ^ mix64(((guint64)idx << 56) ^ n)) >= r->p_below)
		return false;
	f = __atomic_load_n(&r->faults, __ATOMIC_RELAXED);
	do {
		if (r->max && f >= r->max)
			return false;
	} while (!__atomic_compare_exchange_n(&r->faults, &f, f + 1, false,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return true;
}

static struct {
	struct rule when;    /* op and glob */
	void (*fn)(void *arg);
	void *arg;
} hook;

void kvt_fault_hook(enum kvt_fault_op op, const char *glob, void (*fn)(void *arg),
		    void *arg)
{
	g_free(hook.when.glob);
	hook.when.op = (int)op;
	hook.when.glob = g_strdup(glob);
	hook.fn = fn;
	hook.arg = arg;
	kvt_faults_on = true;
}

static void run_hook(enum kvt_fault_op op, const char *const *names, guint n)
{
	void (*fn)(void *arg) = hook.fn;

	if (hook.when.op != (int)op || !name_matches(&hook.when, names, n))
		return;
	hook.fn = NULL;
	g_clear_pointer(&hook.when.glob, g_free);
	kvt_faults_on = n_rules > 0;
	fn(hook.arg);
}

int kvt_fault_check_names(enum kvt_fault_op op, const char *const *names, guint n)
{
	if (G_UNLIKELY(hook.fn))
		run_hook(op, names, n);
	for (guint i = 0; i < n_rules; i++) {
		struct rule *r = &rules[i];

		if ((r->op != (int)op && r->op != OP_ANY) || !name_matches(r, names, n))
			continue;
		if (!fires(r, i))
			continue;
		if (r->delay_us) {
			/* A slow lower file system (each call a round trip
			 * on a network one): the call waits, then is made. */
			g_usleep(r->delay_us);
			return 0;
		}
		g_debug("fault: %s %s%s%s: %s", op_names[op],
			n && names[0] ? names[0] : "-", n > 1 && names[1] ? " " : "",
			n > 1 && names[1] ? names[1] : "", g_strerror(r->err));
		/* As a failure of the lower file system would be. */
		return kvt_lower_failed(op_names[op], n ? names[0] : NULL, r->err);
	}
	return 0;
}

int kvt_fault_check(enum kvt_fault_op op, const char *name, const char *name2)
{
	const char *names[2] = { name, name2 };

	return kvt_fault_check_names(op, names, name2 ? 2 : 1);
}
