/* The door's fault layer: lower errors injected on purpose, for tests.
 *
 * Inert unless the daemon starts with KVT_FAULTS in its environment.  Then
 * every call of the door (lower.c), those on a file open by fd among them,
 * and the few system calls that read or write a lower file's bytes
 * (stage.c, name.c, verify.c, layout.c; file.c for reads served to a
 * client), first asks kvt_fault(); a rule that fires makes the call fail
 * with its errno, as the lower file system would, before anything is
 * done.  Off, the cost is one predictable branch on a global flag.
 * Nothing is logged per fault but at debug level (-d); the daemon logs
 * the rules as a warning at start and how often each fired when it
 * exits.
 *
 * KVT_FAULTS is a comma-separated list of rules, and optionally a seed:
 *
 *   KVT_FAULTS="seed=7,rename:ENOSPC:every=50:name=*.bin,write:EIO:p=1/100:name=d.*"
 *
 * A rule is OP:ERRNO[:COND]...
 *   OP     open create opendir stat mkdir rmdir unlink link rename setattr
 *          sync list read serve write lock, or any
 *   ERRNO  a name (EIO, ENOSPC, EDQUOT, EROFS, ...) or a number; or a
 *          delay, <N>ms (1-60000): the call waits N ms, then is made (a
 *          lower file system where each call is a round trip)
 *   COND   all must hold (none: every call the rule matches fails)
 *          N, every=N   the Nth, 2Nth, ... call the rule matches
 *          1/N, p=F     with probability 1/N or F (0 < F <= 1, or A/B),
 *                       drawn from the seed and the call's number: the
 *                       same seed picks the same calls
 *          after=N      none of the first N calls
 *          max=N        at most N faults
 *          name=GLOB    only calls on a name matching GLOB (fnmatch(3),
 *                       '*' matches '/' too); name=!GLOB: not matching.
 *                       A call on no name matches no name= rule.
 * A call is counted by a rule when its op and name match; the first rule
 * that fires decides and the rules after it do not see the call.
 *
 * The names the ops are asked with:
 *   open create stat mkdir rmdir unlink setattr: the name in its directory
 *     (open: without O_CREAT, create: with; staging files are d.<n>
 *     (versions being written) and n.<n> (records being installed)); the
 *     stat of an open object (a read's size check, its link count when
 *     it gets its anchor) has no name
 *   opendir: the relative path opened
 *   link rename: either name, from or to (a record is renamed from n.<n>
 *     onto the client's name)
 *   list: a listing matches when one of its entries does
 *   read: record files (their name), staged files (d.<n>), objects read
 *     to verify them (<hash>.<ref>)
 *   serve: objects read to answer a client's read (<hash>.<ref>)
 *   write: staged files (d.<n>, a truncation too), records (n.<n>), the
 *     store's marker
 *   sync: object bytes (<hash>.<ref>), staged files (d.<n>: -o sync),
 *     records (their name; n.<n> written out before its rename with
 *     -o sync), the store's marker; the fsync of a directory has no name
 *   lock: a record held across mounts (its name), a staging directory's
 *     lock file (lock), the reclaimer's lock on the store's marker */
#pragma once
#include <glib.h>
#include <stdbool.h>

enum kvt_fault_op {
	KVT_FAULT_OPEN,
	KVT_FAULT_CREATE,
	KVT_FAULT_OPENDIR,
	KVT_FAULT_STAT,
	KVT_FAULT_MKDIR,
	KVT_FAULT_RMDIR,
	KVT_FAULT_UNLINK,
	KVT_FAULT_LINK,
	KVT_FAULT_RENAME,
	KVT_FAULT_SETATTR,
	KVT_FAULT_SYNC,
	KVT_FAULT_LIST,
	KVT_FAULT_READ,
	KVT_FAULT_SERVE,
	KVT_FAULT_WRITE,
	KVT_FAULT_LOCK,
	KVT_FAULT_NOPS,
};

/* Set once, before any thread, by kvt_faults_init(). */
extern bool kvt_faults_on;

/* Parses @spec (NULL or "": no faults) and arms the rules.  False, with
 * @err naming the part that is wrong, on a bad spec: nothing is armed. */
bool kvt_faults_init(const char *spec, GError **err);
/* Disarms and frees the rules (single-threaded, like init). */
void kvt_faults_fini(void);
/* The rules as parsed, one per line with how many calls each counted and
 * failed; NULL when no rule is armed. */
char *kvt_faults_summary(void);

/* For unit tests: @fn(@arg) is called once, when the first call of @op
 * on a name matching @glob (fnmatch(3); either name of a link or rename)
 * comes here, before that call is done and before any rule: a test puts
 * another mount's step between two steps of one transaction.  The hook is
 * disarmed before @fn runs, so @fn may use the store.  Single-threaded,
 * like kvt_faults_init; the layer is on until the hook fired. */
void kvt_fault_hook(enum kvt_fault_op op, const char *glob, void (*fn)(void *arg),
		    void *arg);

/* -errno to inject for a call of @op on @name (and @name2: link, rename;
 * either may be NULL), or 0. */
int kvt_fault_check(enum kvt_fault_op op, const char *name, const char *name2);
/* The same for a listing, on the @n names in @names. */
int kvt_fault_check_names(enum kvt_fault_op op, const char *const *names, guint n);

static inline int kvt_fault(enum kvt_fault_op op, const char *name)
{
	if (G_LIKELY(!kvt_faults_on))
		return 0;
	return kvt_fault_check(op, name, NULL);
}

static inline int kvt_fault2(enum kvt_fault_op op, const char *name, const char *name2)
{
	if (G_LIKELY(!kvt_faults_on))
		return 0;
	return kvt_fault_check(op, name, name2);
}
