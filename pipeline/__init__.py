"""The pipeline runner: strings the stages (doctrine, data, train, adapter, eval, report)
together from one ``configs/pipeline/*.yaml`` recipe. It sits above every stage package and
no stage imports it; see :mod:`pipeline.runner`.
"""
