/* Records read by many threads at once, as the daemon's first lookups
 * after a start or a drop of the kernel's caches read them: each parse
 * must answer as a lone one does.  Each round is a fresh process, so that
 * whatever a library sets up on its first use is set up under the race.
 * Prints TAP. */
#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "record.h"

#define THREADS 16
#define ROUNDS 2000

static int n_test, n_fail;

static void ok(bool cond, const char *desc)
{
	n_test++;
	if (!cond)
		n_fail++;
	printf("%sok %d - %s\n", cond ? "" : "not ", n_test, desc);
}

static GString *g_body;
static pthread_barrier_t g_start;
static int g_bad;

static void *parse_one(void *arg)
{
	struct kvt_record r;

	(void)arg;
	pthread_barrier_wait(&g_start);
	if (kvt_record_parse(g_body->str, g_body->len, &r) != 0 || r.size != 262144)
		__atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
	kvt_record_clear(&r);
	return NULL;
}

/* One fresh process: THREADS parses at once; exit status: how many failed. */
static int child(void)
{
	pthread_t t[THREADS];

	pthread_barrier_init(&g_start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, parse_one, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return g_bad;
}

int main(void)
{
	struct kvt_record rec;
	int failed_rounds = 0, failed_parses = 0;

	printf("1..2\n");
	kvt_record_init(&rec);
	for (int i = 0; i < 16; i++)
		rec.hash.b[i] = (uint8_t)(0x6e + i * 7);
	rec.size = 262144;
	snprintf(rec.ref, sizeof(rec.ref), "%s", "0348eede49");
	/* encoded before any fork: the children's first parse is theirs */
	g_body = kvt_record_encode(&rec);
	for (int round = 0; round < ROUNDS; round++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		if (pid == 0)
			_exit(child());
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
			failed_rounds++;
			continue;
		}
		if (WEXITSTATUS(st)) {
			failed_rounds++;
			failed_parses += WEXITSTATUS(st);
		}
	}
	{
		g_autofree char *d = g_strdup_printf("%d parses at once, in each of %d fresh processes, "
						     "all succeed (%d rounds failed, %d parses)",
						     THREADS, ROUNDS, failed_rounds, failed_parses);
		ok(failed_rounds == 0, d);
	}
	{
		struct kvt_record r;

		ok(kvt_record_parse(g_body->str, g_body->len, &r) == 0 && r.size == 262144 &&
			   !strcmp(r.ref, "0348eede49"),
		   "the record parses alone");
		kvt_record_clear(&r);
	}
	g_string_free(g_body, TRUE);
	return n_fail ? 1 : 0;
}
