/* kvtierfs-bench --life: a server's stream of requests (life.c). */
#ifndef KVT_LIFE_H
#define KVT_LIFE_H

#include <stdint.h>

struct life_opts {
	uint64_t blocks;       /* stop once the stream made this many new blocks; 0: no limit */
	uint64_t capacity;     /* blocks kept, the least recently used evicted; 0: all */
	double duration;       /* stop after this many seconds; 0: no limit */
	unsigned families;     /* prompt families */
	double zipf;           /* their popularity: P(rank k) ~ 1 / k^zipf */
	uint64_t seed;
	unsigned threads;      /* loaders, and as many storers */
	double interval;       /* seconds between progress lines */
	int pid;               /* the daemon whose RSS and fds are sampled; 0: none */
	int json;              /* one JSON document instead of lines */
};

/* Runs the stream against the directory of bio_setup(); returns the
 * number of errors (wrong bytes included). */
uint64_t life_run(const struct life_opts *o);

#endif
