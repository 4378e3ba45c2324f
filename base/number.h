/*
 * number.h — a whole number as people write it on a command line or in a
 * configuration file: decimal digits only.
 *
 * Owns the one strict decimal parser that onced's options, oncectl's
 * arguments, durations (duration.h) and the JSON mapping's integers
 * (http/json_scalar.c) share.
 * Invariant: no sign, no spaces, no hex or octal, no locale; a value above
 * UINT64_MAX is ERANGE, never wrapped or clamped.
 * Never: uses strtoull (it accepts all of those).
 */
#ifndef BASE_NUMBER_H
#define BASE_NUMBER_H

#include <stdint.h>

/* Reads the decimal digits at the start of s into *v and points *end
 * after them. 0; EINVAL when s does not start with a digit; ERANGE when
 * the number is above UINT64_MAX (*v and *end untouched on error). */
int number_parse_u64(const char *s, const char **end, uint64_t *v);

/* number_parse_u64 over the whole of s: nothing may follow the digits. */
int number_parse_u64_all(const char *s, uint64_t *v);

#endif /* BASE_NUMBER_H */
