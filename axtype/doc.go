// Package axtype holds the domain types of ax as the engine, the API and the
// CLI see them: the eight instance states and the transition table between
// them (docs/states.md), and the Instance and Run values
// the scheduler moves through that table.
//
// It exists so that the rules of the state machine have one home that is not
// the database: package store maps its rows into these values, and everything
// else reads and writes them without knowing how they are stored (as river
// keeps rivertype apart from its drivers).
//
// axtype must stay a leaf: it imports the standard library only, never a
// database driver and nothing else of ax, so that any package (store, engine,
// the API, tests) can import it without pulling in more. Values are plain
// data, safe to copy; the table is read-only after init and safe for
// concurrent use.
package axtype
