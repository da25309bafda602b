"""orderlib: penalties, losses, encoders, data and evaluation for visual-semantic embeddings.

Order-Embeddings (Vendrov et al., 2016), DeViSE (Frome et al., 2013), VSE++ on MIT-States
(Utama) and Sherlock (Elhoseiny et al., 2017); see the notebooks for each paper's experiments.
"""

__version__ = "0.1.0"
