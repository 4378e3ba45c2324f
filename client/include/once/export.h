/*
 * once/export.h — ONCE_API, the mark on every function libonce exports.
 *
 * libonce is built with -fvisibility=hidden: a function is part of the
 * library's interface exactly when its declaration in an installed header
 * carries ONCE_API, so the export list is the headers themselves.
 */
#ifndef ONCE_EXPORT_H
#define ONCE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define ONCE_API __attribute__((visibility("default")))
#else
#define ONCE_API
#endif

#endif /* ONCE_EXPORT_H */
