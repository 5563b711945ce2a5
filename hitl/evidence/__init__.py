"""Evidence of human oversight an auditor verifies without trusting the operator.

`starter.py evidence` exports every request and decision of a session, a tree of sessions or a
period as one bundle (gather.py reads them from Temporal; bundle.py writes and verifies the file);
`starter.py evidence verify` checks a bundle with the operator's public key alone. The format and
what each field answers of the EU AI Act's Art. 14 are in docs/evidence-bundles.md.
"""
