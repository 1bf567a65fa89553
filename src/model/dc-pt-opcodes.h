/* dc-pt-opcodes.h: the pickle opcodes the checkpoint writer emits and the
 * reader accepts (a subset of protocol 2; Python's Lib/pickletools.py
 * documents each). Any other opcode is refused by the reader.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#define DC_PICKLE_PROTO        0x80
#define DC_PICKLE_STOP         '.'
#define DC_PICKLE_MARK         '('
#define DC_PICKLE_EMPTY_DICT   '}'
#define DC_PICKLE_EMPTY_TUPLE  ')'
#define DC_PICKLE_SETITEMS     'u'
#define DC_PICKLE_TUPLE        't'
#define DC_PICKLE_GLOBAL       'c'
#define DC_PICKLE_REDUCE       'R'
#define DC_PICKLE_BINPERSID    'Q'
#define DC_PICKLE_BININT       'J'
#define DC_PICKLE_LONG1        0x8a
#define DC_PICKLE_BINUNICODE   'X'
#define DC_PICKLE_NEWTRUE      0x88
#define DC_PICKLE_NEWFALSE     0x89
