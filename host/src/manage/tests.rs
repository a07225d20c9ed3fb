//! Unit tests of managed installs: capping by the ceiling, narrowing by the arguments, and
//! the consent's binding to the digest and the grant set.
